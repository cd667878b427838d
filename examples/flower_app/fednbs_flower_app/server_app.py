"The ServerApp the SuperLink runs: the algorithm's own broadcast and aggregate, metrics written after every round."
from fednbs.deploy import deployment_server_app

app = deployment_server_app()
