"""Check a run configuration of this app the way its ServerApp reads it, before `flwr run` starts anything.

    python check_config.py [--run-config 'strategy="FedMedian" rounds=5']

A bad configuration (a strategy `flwr.serverapp.strategy` lacks, an unknown key, algorithm or dataset, a value
`fednbs run` refuses, a bad data option or hyper-parameter) is refused in one line with exit status 2; a good one is
summarised in one line (exit status 0). `flwr run` exits 0 whatever the ServerApp does with the run.
The checks are `fednbs.deploy.check_app_config`'s."""
import argparse, sys
from pathlib import Path

APP = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-config", help="the overrides you give `flwr run --run-config`")
    args = ap.parse_args(argv)
    from fednbs.deploy import check_app_config
    try: cfg, opts = check_app_config(APP, args.run_config, stock_strategy=True)
    except Exception as e:
        print(f"{APP.name}: bad run config: {e}", file=sys.stderr)
        return 2
    print(f"{APP.name}: run config ok: Flower's {opts['strategy']} with {cfg.algo} clients on {cfg.data}, {cfg.rounds} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
