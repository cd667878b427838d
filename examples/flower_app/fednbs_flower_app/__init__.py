"fednbs algorithms as a Flower App (see the folder's README.md)."
