"""Check a run configuration of this app the way its ServerApp reads it, before `flwr run` starts anything.

    python check_config.py [--run-config 'algo="fedprox" rounds=5']

A bad configuration (unknown key, algorithm or dataset, a value `fednbs run` refuses, a bad data option or
hyper-parameter) is refused in one line with exit status 2; a good one is summarised in one line (exit status 0).
The README runs it before `flwr run`, whose own exit status does not tell whether the ServerApp accepted the run."""
import argparse, re, sys
from dataclasses import replace
from pathlib import Path

APP = Path(__file__).resolve().parent


def run_config(overrides: str | None, app: Path = APP) -> dict:
    "The app's run config (`[tool.flwr.app.config]` of its pyproject.toml) with `overrides` applied, as Flower fuses them."
    from flwr.common.config import get_fused_config_from_dir, parse_config_args
    return get_fused_config_from_dir(app, parse_config_args([overrides] if overrides else None))


def check(config: dict):
    "The resolved `RunConfig` of `config`; raises for anything the ServerApp or `fednbs run` would refuse."
    from fednbs.core import ALGORITHMS, check as require
    from fednbs.deploy import config_from_run_config
    from fednbs.experiment import resolve, check_data_options
    cfg, opts = config_from_run_config(config)
    cfg = resolve(replace(cfg, engine="flower"))
    check_data_options(cfg.data, cfg.data_options)
    ALGORITHMS[cfg.algo](**cfg.algo_params)   # its hyper-parameters, checked by its class
    m = opts["min-clients"]
    require(isinstance(m, int) and not isinstance(m, bool) and m >= 1, f"min-clients must be a positive int (got {m!r})", "e.g. min-clients=1")
    for k in ("round-timeout", "wait-timeout", "num-threads"):
        require(isinstance(opts[k], (int, float)) and opts[k] >= 0, f"{k} must be a number of 0 or more (got {opts[k]!r})", f"e.g. {k}=0")
    return cfg


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
    try: cfg = check(run_config(args.run_config))
    except Exception as e:   # FednbsError, or Flower's ValueError for a key the app does not list
        print(f"{APP.name}: bad run config: {said(e)}", file=sys.stderr)
        return 2
    print(f"{APP.name}: run config ok: {cfg.algo} on {cfg.data}, {cfg.rounds} rounds, out={cfg.out or '(none)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
