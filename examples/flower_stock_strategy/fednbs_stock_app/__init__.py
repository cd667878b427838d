"fednbs clients under one of Flower's own strategies (see the folder's README.md)."
