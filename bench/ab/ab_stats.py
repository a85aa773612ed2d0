"""Statistics of the paired A/B protocol: medians, relative IQR, the A/A self-control check and
the verdict. Pure functions on lists of numbers; nothing here runs a command or reads a file.

Ratios are always A / B of throughputs (tok/s), so a ratio above 1 means A is faster.
"""

import statistics

# A row whose per-round ratios spread more than this (IQR / median) is refused: the machine was
# too noisy for the median to mean anything at the few-percent level we care about.
MAX_REL_IQR = 0.10
# Floor of the noise band used by the A/A check and the verdict. With few rounds the IQR can come
# out near zero by chance; sub-percent differences are timer and frequency jitter, not findings.
MIN_NOISE = 0.01


def median(values):
    if not values:
        raise ValueError("median of no values")
    return statistics.median(values)


def quartiles(values):
    """(q1, q3) with linear interpolation between order statistics (numpy's default method)."""
    if not values:
        raise ValueError("quartiles of no values")
    if len(values) == 1:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def rel_iqr(values):
    """Interquartile range divided by the median: the spread of the ratios, scale-free."""
    q1, q3 = quartiles(values)
    med = median(values)
    if med <= 0:
        raise ValueError(f"median {med} is not positive; throughputs must be > 0")
    return (q3 - q1) / med


def mean(values):
    return sum(values) / len(values)


class Summary:
    """Median ratio and its relative IQR over rounds, plus the arms' median throughputs."""

    def __init__(self, ratios, a_values, b_values):
        if not ratios:
            raise ValueError("no rounds to summarise")
        self.ratios = list(ratios)
        self.ratio = median(ratios)
        self.rel_iqr = rel_iqr(ratios)
        self.a_median = median(a_values)
        self.b_median = median(b_values)
        self.rounds = len(ratios)

    def noise(self):
        return max(self.rel_iqr, MIN_NOISE)


def abba_ratios(rounds):
    """rounds: list of (a1, b1, b2, a2) throughputs of one metric, run in that order. The mean of
    the two A runs over the mean of the two B runs cancels a linear drift within the round."""
    ratios = []
    for a1, b1, b2, a2 in rounds:
        ratios.append(mean([a1, a2]) / mean([b1, b2]))
    return ratios


def aa_ratios(pairs):
    """pairs: list of (first, second) throughputs of the same command A run twice in a row.
    Alternates which run is the numerator so that a systematic first-run/second-run effect shows
    up as spread, not as a ratio off 1.0 that would be mistaken for a difference."""
    ratios = []
    for i, (first, second) in enumerate(pairs):
        ratios.append(first / second if i % 2 == 0 else second / first)
    return ratios


def check_self_control(summary):
    """A/A check: returns None when A measured against itself is quiet and unbiased, or the reason
    the machine cannot be trusted for this metric."""
    if summary.rel_iqr > MAX_REL_IQR:
        return (f"A/A ratio IQR/median {summary.rel_iqr:.3f} > {MAX_REL_IQR:.2f}: "
                f"the machine is too noisy")
    if abs(summary.ratio - 1.0) > summary.noise():
        return (f"A/A median ratio {summary.ratio:.4f} is off 1.0 by more than the noise "
                f"({summary.noise():.3f}): runs of the same command are not interchangeable")
    return None


def check_row(summary):
    """A/B check: None when the row may be recorded, else why it is refused."""
    if summary.rel_iqr > MAX_REL_IQR:
        return f"A/B ratio IQR/median {summary.rel_iqr:.3f} > {MAX_REL_IQR:.2f}: too noisy"
    return None


def verdict(summary):
    """'A faster', 'B faster' or 'tie', judged against the row's own noise band."""
    noise = summary.noise()
    if summary.ratio - 1.0 > noise:
        return f"A faster ({(summary.ratio - 1.0) * 100:+.1f}%)"
    if 1.0 / summary.ratio - 1.0 > noise:
        return f"B faster ({(1.0 / summary.ratio - 1.0) * 100:+.1f}%)"
    return "tie (within noise)"
