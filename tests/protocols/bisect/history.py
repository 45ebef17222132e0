"""Engine histories for the bisect tests: a git repository of `reference-build.toml`
(the reference engine reads it at each commit), with one commit that changes the engine."""

from __future__ import annotations

from pathlib import Path

from tests.builds.repos import commit_all, git, init_repo, write_reference_config


def make_history(path: Path, commits: int = 16, change_at: int | None = None,
                 noise: float = 0.25, broken_at: int | None = None) -> tuple[Path, list[str]]:
    """GOOD (noise 0) then `commits` commits, oldest first; commit `change_at` (1-based)
    raises the draft noise to `noise` (None: no commit changes the engine). Every commit
    also edits notes.txt, so each has something to build. `broken_at`: a commit whose
    config does not parse (the next one repairs it). Returns (repo, [GOOD, c1 .. cN])."""
    repo = init_repo(path)
    write_reference_config(repo, "fixed", 0.0)
    (repo / "notes.txt").write_text("engine notes\n")
    shas = [commit_all(repo, "GOOD: the engine before")]
    current = 0.0
    for k in range(1, commits + 1):
        (repo / "notes.txt").write_text(f"engine notes, change {k}\n")
        subject = f"engine change {k}"
        if k == change_at:
            current = noise
            subject = f"engine change {k}: draft noise {noise:g}"
        write_reference_config(repo, "fixed", current)
        if k == broken_at:
            (repo / "reference-build.toml").write_text("draft_noise = \n")
            subject = f"engine change {k}: a config that does not parse"
        if k % 4 == 0:
            (repo / "docs").mkdir(exist_ok=True)
            (repo / "docs" / f"note{k}.md").write_text("docs only\n")
        shas.append(commit_all(repo, subject))
    return repo, shas


__all__ = ["git", "make_history"]

if __name__ == "__main__":  # the README's demo: python -m tests.protocols.bisect.history DIR
    import argparse

    parser = argparse.ArgumentParser(description="a reference-engine history to bisect")
    parser.add_argument("path", type=Path)
    parser.add_argument("--commits", type=int, default=16)
    parser.add_argument("--change-at", type=int, default=11)
    parser.add_argument("--noise", type=float, default=0.25)
    args = parser.parse_args()
    repo, shas = make_history(args.path, args.commits, args.change_at, args.noise)
    print(f"{repo}: GOOD {shas[0]}, the noise rises at commit {args.change_at} "
          f"{shas[args.change_at]}, main {shas[-1]}")
