"""Check a run configuration of this app the way its ServerApp reads it, before `flwr run` starts anything.

    python check_config.py [--run-config 'strategy="FedMedian" rounds=5']

A bad configuration (a strategy `flwr.serverapp.strategy` lacks, an unknown key, algorithm or dataset, a value
`fednbs run` refuses, a bad data option or hyper-parameter) is refused in one line with exit status 2; a good one is
summarised in one line (exit status 0). `flwr run` exits 0 whatever the ServerApp does with the run."""
import argparse, re, sys
from dataclasses import replace
from pathlib import Path

APP = Path(__file__).resolve().parent


def check(config: dict):
    "`(strategy name, resolved RunConfig)` of `config`; raises for anything the ServerApp or `fednbs run` would refuse."
    import flwr.serverapp.strategy as flower_strategies
    from fednbs.core import ALGORITHMS, check as require
    from fednbs.deploy import config_from_run_config
    from fednbs.experiment import resolve, check_data_options
    name = str(config.get("strategy", "FedAvg"))
    require(isinstance(getattr(flower_strategies, name, None), type), f"flwr.serverapp.strategy has no strategy '{name}'",
            "e.g. strategy=\"FedAvg\" or \"FedMedian\"")
    cfg, _ = config_from_run_config({k: v for k, v in config.items() if not k.startswith("strategy")})
    cfg = resolve(replace(cfg, engine="flower"))
    check_data_options(cfg.data, cfg.data_options)
    ALGORITHMS[cfg.algo](**cfg.algo_params)   # its hyper-parameters, checked by its class
    return name, cfg


def said(e: Exception) -> str:
    "The one line that refuses a run configuration for `e`."
    line = str(e).splitlines()[0] if str(e) else type(e).__name__
    unknown = re.match(r"Key '(.+)' is not present in the main dictionary", line)   # Flower's words for an unlisted key
    if unknown: return (f"run-config key '{unknown[1]}' is not present in this app's [tool.flwr.app.config] "
                        "(pyproject.toml): only the keys listed there can be set")
    return line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-config", help="the overrides you give `flwr run --run-config`")
    args = ap.parse_args(argv)
    try:
        from flwr.common.config import get_fused_config_from_dir, parse_config_args
        name, cfg = check(get_fused_config_from_dir(APP, parse_config_args([args.run_config] if args.run_config else None)))
    except Exception as e:   # FednbsError, or Flower's ValueError for a key the app does not list
        print(f"{APP.name}: bad run config: {said(e)}", file=sys.stderr)
        return 2
    print(f"{APP.name}: run config ok: Flower's {name} with {cfg.algo} clients on {cfg.data}, {cfg.rounds} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
