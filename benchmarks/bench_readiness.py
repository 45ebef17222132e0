"""How long after a server becomes ready does the harness notice? (goal <= 0.5 s)

Starts the SGLang test double (tests/fake_sglang) several times; the double
writes the wall-clock time at which it starts answering 200 on
/health_generate, and the harness's `Server.wait_ready` returns when it sees
that. SGLang's own test helper polls every 10 s (mean delay about 5 s).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness.run.launch import Server, ServerSpec, free_port

ROOT = Path(__file__).resolve().parent.parent
GOAL_S = 0.5
SGLANG_HELPER_POLL_S = 10.0
TRIALS = 5


def one_trial(folder: Path, index: int) -> float:
    ready_file = folder / f"ready-{index}"
    os.environ["FAKE_SGLANG_READY_FILE"] = str(ready_file)
    os.environ["FAKE_SGLANG_STARTUP_S"] = str(0.5 + 0.37 * index)  # ready at varied phases
    port = free_port()
    spec = ServerSpec(
        command=[sys.executable, "-m", "sglang.launch_server", "--model-path", "m",
                 "--host", "127.0.0.1", "--port", str(port)],
        log_path=folder / f"server-{index}.log", port=port, launch_timeout_s=60)
    with Server(spec) as server:
        server.wait_ready()
        noticed = time.time()
    return noticed - float(ready_file.read_text())


def main() -> int:
    os.environ["PYTHONPATH"] = str(ROOT / "tests" / "fake_sglang")
    with tempfile.TemporaryDirectory() as tmp:
        delays = [one_trial(Path(tmp), i) for i in range(TRIALS)]
    worst, mean = max(delays), statistics.mean(delays)
    print(f"readiness notice delay over {TRIALS} launches: mean {mean * 1000:.0f} ms, "
          f"worst {worst * 1000:.0f} ms")
    print(f"  worst / goal ({GOAL_S} s): {worst / GOAL_S:.2f}")
    print(f"  SGLang helper's expected delay ({SGLANG_HELPER_POLL_S / 2:.0f} s) / ours: "
          f"{SGLANG_HELPER_POLL_S / 2 / max(mean, 1e-3):.0f}x")
    return 0 if worst <= GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
