"""One step of GGEUR: the authors' numpy code and fednbs on the same embeddings (statistics, geometry, samples, filling).

    python tools/fidelity/ggeur_step.py [--seed S] [--source GIT]

The authors' repository is cloned into the cache folder of `run_authors.py` (outside the project,
FEDNBS_FIDELITY_CACHE, default ~/.cache/fednbs-fidelity), and the files this check reads are written there from the
pinned commit below; nothing of it is copied into this project. `--source` clones from another place (a local mirror)
instead of GitHub. Every change needed to run their code is made at run time by this file and listed in
tools/fidelity/README.md. Writes nbs/tutorials/fidelity_results/step_ggeur.json: a list of
{method, quantity, max_abs_diff, authors_commit}.
"""
import argparse, contextlib, importlib.util, io, json, sys, tempfile
from pathlib import Path
import numpy as np
import torch
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_authors as ra
import generalization_step as gs

PINS = {"ggeur": ("https://github.com/WeiDai-David/2025CVPR_GGEUR", "02624d547047e9c064dbaeba3c6c11831f963e0a")}
SINGLE, MULTI = "Single Domian", "Multi Domain/Office-Home-LDS"   # the authors' folder names, as spelled
FILES = {"ggeur": [f"{SINGLE}/client-guided_set.py", f"{SINGLE}/clip_tensor2aggregate_covariance_matrix.py",
                   f"{SINGLE}/cov_matrix_generate_features.py", f"{MULTI}/clip_tensor2aggregate_covariance_matrix.py",
                   f"{MULTI}/prototype_cov_matrix_generate_features.py"]}
gs.PINS.update(PINS); gs.FILES.update(FILES)

def row(quantity, d):
    print(f"  {quantity:70s} max |diff| {d:.1e}")
    return {"method": "ggeur", "quantity": quantity, "max_abs_diff": d, "authors_commit": PINS["ggeur"][1]}

def their_module(repo: Path, rel: str, name: str):
    "The authors' file `rel` imported as module `name` (its `__main__` block does not run; its prints are silenced)."
    spec = importlib.util.spec_from_file_location(name, repo / rel)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

def quiet(f, *args):
    with contextlib.redirect_stdout(io.StringIO()): return f(*args)

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--source", default=None)
    p.add_argument("--out", default=str(ra.HERE.parents[1] / "nbs" / "tutorials" / "fidelity_results" / "step_ggeur.json"))
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    from fednbs.ggeur import class_moments, pooled_moments, class_geometry, geometric_samples, ggeur_fill
    repo = gs.checkout("ggeur", a.source)
    s_cov = their_module(repo, f"{SINGLE}/clip_tensor2aggregate_covariance_matrix.py", "ggeur_single_cov")
    s_guide = their_module(repo, f"{SINGLE}/client-guided_set.py", "ggeur_single_guide")
    s_gen = their_module(repo, f"{SINGLE}/cov_matrix_generate_features.py", "ggeur_single_gen")
    m_cov = their_module(repo, f"{MULTI}/clip_tensor2aggregate_covariance_matrix.py", "ggeur_multi_cov")
    m_gen = their_module(repo, f"{MULTI}/prototype_cov_matrix_generate_features.py", "ggeur_multi_gen")

    rng = np.random.default_rng(a.seed)
    d, sizes = 12, (30, 9, 4)                                    # three clients' embeddings of class 0 (4 < d: a singular one)
    feats = [rng.normal(k, 1 + k, (n, d)) for k, n in enumerate(sizes)]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        paths, dirs = [], []
        for k, z in enumerate(feats):
            paths.append(f"{tmp}/client_{k}_class_0_original_features.npy"); np.save(paths[-1], z)
            dirs.append(f"{tmp}/alpha=0.1_class_0_client_{k}"); Path(dirs[-1]).mkdir()
            np.save(f"{dirs[-1]}/final_embeddings.npy", z)
        theirs_multi = quiet(m_cov.process_class_aggregated_covariance, 0, paths)
        bank = [np.zeros((d, d))]
        quiet(s_cov.process_multiple_appearances, 0, dirs, bank)
    moms = [class_moments(torch.tensor(z), torch.zeros(len(z), dtype=torch.long), 1) for z in feats]
    counts, means, covs = (torch.stack(t) for t in zip(*moms))
    _, _, ours = pooled_moments(counts, means, covs)
    out.append(row("global covariance from client moments, multi domain (all clients)",
                   gs.maxdiff(ours[0], theirs_multi)))
    out.append(row("global covariance from client moments, single domain", gs.maxdiff(ours[0], bank[0])))

    # the single-domain client-guided set: clients holding 80 % of a class, largest first (3 classes, 4 clients)
    table = [[50, 0, 7], [30, 10, 7], [15, 25, 7], [5, 65, 9]]
    picks = {}
    for c in range(3):
        total = sum(r[c] for r in table)
        picks[c] = quiet(s_guide.analyze_class_distribution, [[r[c]] for r in table], 1, total)[0]
    n_t = torch.tensor(table, dtype=torch.float64)
    kept_n, _, _ = pooled_moments(n_t, torch.zeros(4, 3, 1, dtype=torch.float64), torch.zeros(4, 3, 1, 1, dtype=torch.float64), 0.8)
    want = torch.tensor([sum(table[k][c] for k in picks[c]) for c in range(3)], dtype=torch.float64)
    out.append(row("samples of the clients entering a class's covariance (cover 0.8)", gs.maxdiff(kept_n, want)))

    # positive-semidefinite repair: single domain (no scaling) and multi domain (the first ten of eigh's order x 5 ... 1)
    sym = rng.normal(0, 1, (d, d)); sym = sym @ sym.T / d - 0.4 * np.eye(d)     # some eigenvalues negative
    for scaling, mod, what in (("none", s_gen, "single"), ("code", m_gen, "multi")):
        lam, vec = class_geometry(torch.tensor(sym)[None], scaling)
        mine = (vec[0] * lam[0]) @ vec[0].T
        theirs = mod.nearest_pos_def(sym.copy()) + 1e-6 * np.eye(d)
        out.append(row(f"sampling covariance, repaired and scaled eigenvalues, {what} domain", gs.maxdiff(mine, theirs)))

    # the draws: 20000 around one centre, their numpy draws against ours (statistical: other random numbers)
    cov_t = ours[0].numpy()
    centre = feats[0][0]
    np.random.seed(a.seed)
    theirs = m_gen.generate_new_samples(centre, cov_t, 20000)
    lam, vec = class_geometry(ours, "code")
    mine = geometric_samples(torch.tensor(centre)[None], torch.zeros(20000, dtype=torch.long), lam[0], vec[0],
                             torch.Generator().manual_seed(a.seed)).numpy()
    scale = float(np.sqrt(np.diag(m_gen.nearest_pos_def(cov_t.copy())).max()))
    out.append(row("20000 draws: sample means, theirs - ours (in largest std devs)", float(np.abs(theirs.mean(0) - mine.mean(0)).max()) / scale))
    out.append(row("20000 draws: sample covariances, theirs - ours (in largest vars)", float(np.abs(np.cov(theirs.T) - np.cov(mine.T)).max()) / scale ** 2))

    # filling one class (multi domain, T = 50): how many embeddings, and how many of the client's own are kept
    protos = [f.mean(0) for f in feats[1:]]
    cov_m = {0: cov_t}
    for n in (0, 20, 60):
        own = rng.normal(0, 1, (n, d))
        np.random.seed(a.seed)
        theirs = quiet(m_gen.process_clients, 0, 0, own, cov_m, protos, 50)
        zt = torch.tensor(own) if n else torch.zeros(0, d, dtype=torch.float64)
        mine, _ = ggeur_fill(zt, torch.zeros(n, dtype=torch.long), lam, vec, torch.tensor([50]),
                             torch.tensor(np.stack(protos))[:, None], torch.ones(len(protos), 1), torch.Generator().manual_seed(0))
        kept = lambda rows: sum(bool((np.abs(rows - o).max(1) == 0).any()) for o in own)
        diff = abs(len(theirs) - len(mine)) + abs(kept(theirs) - kept(mine.numpy()))
        out.append(row(f"class filled to 50 from {n} own: count and own kept", float(diff)))
    for r in out: r["max_abs_diff"] = float(f"{r['max_abs_diff']:.3g}")
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {len(out)} rows to {Path(a.out).name}")

if __name__ == "__main__": main()
