"""Progress while the benchmark runs: a tqdm bar on a terminal, one line per step otherwise (logs,
CI). Every step is also appended to the run's log list, which goes into the raw JSON."""
import sys
import time


class Progress:
    def __init__(self, total, enabled=True):
        self.total, self.done, self.t0 = total, 0, time.monotonic()
        self.lines = []
        self.bar = None
        if enabled and sys.stderr.isatty():
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, unit="step", dynamic_ncols=True, file=sys.stderr)
            except ImportError:
                self.bar = None

    def log(self, msg):
        """A note that is not a step (a build, a server start)."""
        line = f"[{time.monotonic() - self.t0:7.1f}s] {msg}"
        self.lines.append(line)
        if self.bar is not None:
            self.bar.write(line)
        else:
            print(line, file=sys.stderr, flush=True)

    def step(self, msg):
        self.done += 1
        line = f"[{time.monotonic() - self.t0:7.1f}s] ({self.done}/{self.total}) {msg}"
        self.lines.append(line)
        if self.bar is not None:
            self.bar.set_description(msg[:60])
            self.bar.update(1)
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()
