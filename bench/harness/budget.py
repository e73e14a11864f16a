"""A wall-clock budget for one bench/run (--budget-s): the GPU machine gives one command about
nine minutes, so the run plans its work against a deadline and skips what does not fit, saying so,
instead of being killed half-way.

The budget is split over the phases still to run by weight: when a phase starts it gets
remaining * weight / (sum of the weights of the phases not yet run), so time a phase leaves
unused rolls over to the next. Inside a phase every block of work (a scenario for both engines,
a concurrency level for both engines, a model's microbenchmarks) is estimated from the blocks of
the same kind measured so far (or a stated first guess) and is run only when it fits the phase's
share, and never past the whole budget; a skipped block is recorded with the reason
(`skipped`, in the JSON and the report). Without a budget everything fits.
"""
import time


class Budget:
    def __init__(self, total_s=None, reserve_s=None, clock=time.monotonic):
        """total_s: the whole run's seconds (None: unlimited); reserve_s: kept back at the end
        for writing the report and the plots (default: 10 % of the budget, at most 20 s)."""
        self.clock = clock
        self.t0 = clock()
        self.total_s = total_s
        if reserve_s is None:
            reserve_s = min(20.0, 0.1 * total_s) if total_s is not None else 0.0
        self.reserve_s = reserve_s if total_s is not None else 0.0
        self.weights = {}
        self.phase_name = None
        self.phase_deadline = None
        self.seen = {}      # kind -> list of measured seconds
        self.skipped = []   # {"phase", "what", "why"}
        self.cuts = []      # notes on work that was shortened to fit

    @property
    def limited(self):
        return self.total_s is not None

    def deadline(self):
        return None if self.total_s is None else self.t0 + self.total_s - self.reserve_s

    def remaining(self):
        """Seconds left before the reserve (inf without a budget)."""
        d = self.deadline()
        return float("inf") if d is None else d - self.clock()

    def plan(self, weights):
        """weights: {phase: weight} for the phases this run will do, in order."""
        self.weights = dict(weights)

    def start_phase(self, name):
        """Gives phase `name` its share of what is left; returns that share in seconds."""
        self.phase_name = name
        w = self.weights.pop(name, 1.0)
        if not self.limited:
            self.phase_deadline = None
            return float("inf")
        rest = sum(self.weights.values())
        share = max(0.0, self.remaining()) * w / (w + rest) if (w + rest) > 0 else 0.0
        self.phase_deadline = self.clock() + share
        return share

    def phase_left(self):
        if not self.limited:
            return float("inf")
        left = self.remaining()
        if self.phase_deadline is not None:
            left = min(left, self.phase_deadline - self.clock())
        return left

    def estimate(self, kind, first_guess):
        xs = self.seen.get(kind)
        return max(xs) if xs else first_guess

    def fits(self, est_s):
        return est_s <= self.phase_left()

    def fits_total(self, est_s):
        """Fits what is left of the whole budget (ignoring the phase's share)."""
        return est_s <= self.remaining()

    def record(self, kind, seconds):
        self.seen.setdefault(kind, []).append(seconds)

    def skip(self, what, why=None, est_s=None):
        if why is None:
            why = (f"budget: needs ~{est_s:.0f} s, {max(0.0, self.phase_left()):.0f} s left of "
                   f"this phase's share" if est_s is not None else "budget")
        self.skipped.append({"phase": self.phase_name, "what": what, "why": why})

    def cut(self, note):
        self.cuts.append({"phase": self.phase_name, "note": note})

    def summary(self):
        return {"budget_s": self.total_s, "reserve_s": self.reserve_s,
                "used_s": self.clock() - self.t0, "skipped": self.skipped, "cuts": self.cuts}
