"The ClientApp every SuperNode runs: fednbs's own, which also answers Flower's standard train/evaluate layout."
from types import SimpleNamespace
from fednbs.deploy import deployed_client
from fednbs.flower import make_client_app

def load(context):
    "This node's fednbs client: the run config (less the strategy's keys) says what to run, the node config which client."
    fednbs_config = {k: v for k, v in context.run_config.items() if not k.startswith("strategy")}
    return deployed_client(SimpleNamespace(run_config=fednbs_config, node_config=context.node_config))

app = make_client_app(load)
