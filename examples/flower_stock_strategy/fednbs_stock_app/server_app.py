"The ServerApp the SuperLink runs: a stock Flower strategy (FedAvg unless the run config names another), started from fednbs's initial model."
import flwr.serverapp.strategy as flower_strategies
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp
from fednbs.deploy import config_from_run_config, build_run
from fednbs.flower import message_to_record

app = ServerApp()

@app.main()
def main(grid: Grid, context: Context):
    cfg, _ = config_from_run_config({k: v for k, v in context.run_config.items() if not k.startswith("strategy")})
    cfg, algo, task, data = build_run(cfg)                     # the model and the clients, as `fednbs run` builds them
    n = len(data.client_names)
    strategy = getattr(flower_strategies, context.run_config["strategy"])(min_train_nodes=n, min_evaluate_nodes=n, min_available_nodes=n)
    initial = message_to_record(algo.init_server()["model"])   # fednbs's seeded initial model (its clients ignore what they keep local)
    result = strategy.start(grid, initial, num_rounds=cfg.rounds)
    head = algo.headline
    for rnd, m in result.evaluate_metrics_clientapp.items():
        print(f"round {rnd}: clients' test accuracy (weighted by num-examples) {m[f'acc_{head}']:.4f}, loss {m[f'loss_{head}']:.4f}", flush=True)
    print(f"final global model: {len(result.arrays)} arrays ({', '.join(list(result.arrays)[:3])}, ...)", flush=True)
