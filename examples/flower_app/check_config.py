"""Check a run configuration of this app the way its ServerApp reads it, before `flwr run` starts anything.

    python check_config.py [--run-config 'algo="fedprox" rounds=5']

A bad configuration (unknown key, algorithm or dataset, a value `fednbs run` refuses, a bad data option or
hyper-parameter) is refused in one line with exit status 2; a good one is summarised in one line (exit status 0).
The README runs it before `flwr run`, whose own exit status does not tell whether the ServerApp accepted the run.
The checks are `fednbs.deploy.check_app_config`'s."""
import argparse, sys
from pathlib import Path

APP = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-config", help="the overrides you give `flwr run --run-config`")
    args = ap.parse_args(argv)
    from fednbs.deploy import check_app_config
    try: cfg, _ = check_app_config(APP, args.run_config)
    except Exception as e:
        print(f"{APP.name}: bad run config: {e}", file=sys.stderr)
        return 2
    print(f"{APP.name}: run config ok: {cfg.algo} on {cfg.data}, {cfg.rounds} rounds, out={cfg.out or '(none)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
