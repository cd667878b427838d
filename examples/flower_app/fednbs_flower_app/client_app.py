"The ClientApp every SuperNode runs: the run config says which algorithm and data, the node config which client this node is."
from fednbs.deploy import deployment_client_app

app = deployment_client_app()
