"""The joint minimum of views that share pods, by exact search over node counts (SPEC §3.5).

One workload with a zone and a hostname constraint has two views over the same pods. The
joint minimum is the fewest evictions such that, evicting one pod and placing its
replacement at a time, every placement passes the filter of ALL the pod's hard constraints at
that moment, and every view ends within its maxSkew. Planning the views one after the other
misses it: with zones [2,2,2 | 0,0,0] (nodes listed per zone) and maxSkew 1 on both keys, the
zone view alone needs 3 moves and the hostname view alone 3, and 3 moves suffice for both
(one pod from each zone-a node to each zone-b node), but a planner that first empties the
fullest node in zone a ends with 4.

The pods of such a group are interchangeable for the counts, so a state is the number of pods
on each node and how many of them may still be evicted (unevictable pods and replacements stay
put). A move takes a pod off a node and puts its replacement on another node that passes the
static filters, has room, and passes every view's spread filter on the counts at that moment
(``count(domain) + 1 - globalMin <= maxSkew``). :func:`search` is an iterative-deepening A*
over these states with a transposition table; its heuristic is the largest distance to
balance over the views (:func:`rebalancer.core.minimal.min_moves`, unmovable pods as floors):
a move changes each view's distance by at most one, so the heuristic never overestimates and
the first depth holding a solution is the joint minimum. At that depth the search lists every
end state (every way to choose how many victims each node gives), so the planner can pick
victims over all minimal plans (:mod:`rebalancer.core.victims`).

Soft views opted in come second (SPEC §3.6): :func:`search_then_soft` first finds the hard
views' joint minimum H and every end state at it, then, from all of them at once, the fewest
further moves F that bring the soft views (:attr:`JointProblem.soft`; they filter nothing)
within maxSkew, each further state keeping every hard view within its maxSkew. The plan is the
H + F moves of the best such path: the hard views get the count they get with soft views off.

The search is exact but exponential: it runs only on small groups (:data:`MAX_PODS` pods,
:data:`MAX_ELIGIBLE` eligible nodes of which at most :data:`MAX_NODES` are modelled: those
holding the pods and, of the empty ones, as many of each kind as pods could move, see
:mod:`rebalancer.core.jointplan`) and gives up once the plan has generated :data:`MAX_VISITS` states
(5-10 µs each, so about 0.35 s at most per plan). Deep solutions are out of its reach: 27 pods
on 3 of 9 nodes (18 moves) take 20,000 states, 96 pods on 4 of 16 nodes more than ten million.
The planner then falls back to its move-by-move search and reports the largest distance over
the group's views as the bound, which is valid jointly but not always reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rebalancer.core.minimal import min_moves

MAX_NODES = 16  # nodes modelled: those holding the pods, and some empty ones of each kind
MAX_ELIGIBLE = 64  # nodes the group's views count (sorting out the empty ones costs per node)
MAX_PODS = 96  # pods the group's views count
MAX_VISITS = 60_000  # states generated per plan, over every group and deepening round


@dataclass(frozen=True, slots=True)
class JointView:
    """One view of the group: each node's domain (an index) and the view's spread rule."""

    domain_of: tuple[int, ...]  # node -> domain index
    domains: int  # eligible domains, empty ones included
    max_skew: int
    forced_zero: bool  # fewer domains than minDomains: the global minimum is 0


@dataclass(frozen=True, slots=True)
class JointProblem:
    """A group of hard views over the same pods, on the same eligible nodes."""

    views: tuple[JointView, ...]
    start: tuple[int, ...]  # pods on each node
    movable: tuple[int, ...]  # of which evictable
    cap: tuple[int, ...]  # most pods a node can hold (room for replacements)
    accepts: tuple[bool, ...]  # the node passes the pods' static filters
    twins: tuple[int, ...] = ()  # a node that started empty: the first node of its kind; else -1
    soft: tuple[JointView, ...] = ()  # soft views over the same pods: no filter, second goal


State = tuple[tuple[int, ...], tuple[int, ...]]  # (pods per node, evictable left per node)
Step = tuple[int, int]  # (node a pod leaves, node its replacement lands on)


@dataclass(slots=True)
class JointResult:
    """The search's answer: the joint minimum and one move sequence per end state."""

    minimum: int | None  # None: balance cannot be reached (``complete``) or was not proven
    complete: bool  # the search ended within its budget
    ends: dict[State, list[Step]] = field(default_factory=dict)
    visits: int = 0  # states generated (each costs a few µs)
    hard: int | None = None  # of ``minimum``, the moves that bring the hard views within


def domain_counts(view: JointView, counts: Sequence[int]) -> list[int]:
    """Pods per domain of the view (every domain, empty ones included)."""
    out = [0] * view.domains
    for node, c in enumerate(counts):
        out[view.domain_of[node]] += c
    return out


def _gmin(view: JointView, per_domain: Sequence[int]) -> int:
    return 0 if view.forced_zero else min(per_domain)


def within(views: Sequence[JointView], counts: Sequence[int]) -> bool:
    """Every view within its maxSkew (a domain holding pods at most maxSkew above the min)."""
    for view in views:
        per_domain = domain_counts(view, counts)
        gmin = _gmin(view, per_domain)
        if any(c > 0 and c - gmin > view.max_skew for c in per_domain):
            return False
    return True


def distance(views: Sequence[JointView], state: State) -> int:
    """The largest distance to balance over the views: a lower bound on the moves left."""
    counts, movable = state
    best = 0
    for view in views:
        per_domain = domain_counts(view, counts)
        if view.forced_zero:
            # the global minimum stays 0: every domain must end at most maxSkew
            d = sum(max(0, c - view.max_skew) for c in per_domain)
        else:
            floors = domain_counts(view, [c - m for c, m in zip(counts, movable, strict=True)])
            d = min_moves(per_domain, view.max_skew, top_floor=max(floors, default=0))
        best = max(best, d)
    return best


def legal_targets(
    problem: JointProblem, counts: Sequence[int], source: int, per_views: Sequence[list[int]]
) -> list[int]:
    """Nodes other than ``source`` that the replacement of a pod leaving ``source`` may land
    on (``counts`` and each view's counts per domain, ``per_views``, are after the pod left):
    static filters, room, every view's spread filter. Landing back on ``source`` would evict
    for nothing."""
    limits = []  # per view: the highest domain count that still takes a pod
    for view, per_domain in zip(problem.views, per_views, strict=True):
        gmin = 0 if view.forced_zero else min(per_domain)
        limits.append(gmin + view.max_skew - 1)
    out = []
    tried: set[tuple[int, int]] = set()  # (kind, count) of the empty-started nodes tried
    for node in range(len(counts)):
        if node == source or not problem.accepts[node] or counts[node] + 1 > problem.cap[node]:
            continue
        if problem.twins and problem.twins[node] >= 0:
            twin = (problem.twins[node], counts[node])
            if twin in tried:
                continue  # a node of the same kind holding as many: the same move
            tried.add(twin)
        for view, per_domain, limit in zip(problem.views, per_views, limits, strict=True):
            if per_domain[view.domain_of[node]] > limit:
                break
        else:
            out.append(node)
    return out


class _Deepening:
    """One IDA* search, round by round, from every start state (with the steps that reached
    it) at once towards ``goal`` (views) within maxSkew; with ``keep``, every state passed
    through also keeps the problem's hard views within (the soft views' search). End states
    found go to ``ends``, visits to ``result``."""

    def __init__(
        self,
        problem: JointProblem,
        goal: tuple[JointView, ...],
        starts: dict[State, list[Step]],
        result: JointResult,
        *,
        ends: dict[State, list[Step]],
        max_visits: int,
        keep: bool = False,
    ) -> None:
        self.problem = problem
        self.goal = goal
        self.starts = starts
        self.result = result
        self.ends = ends
        self.max_visits = max_visits
        self.keep = keep
        self.h_cache: dict[State, int] = {}
        self.bound = 0
        self.next_bound = 0
        self.seen: dict[State, int] = {}
        self.path: list[Step] = []

    def h(self, state: State) -> int:
        found = self.h_cache.get(state)
        if found is None:
            found = self.h_cache[state] = distance(self.goal, state)
        return found

    def deepen(self, limit: int) -> int | None:
        """The fewest moves (at most ``limit``) to an end state, or None; ``result.complete``
        once the answer is proven (found, or out of reach), not when the budget ran out."""
        bound = min(self.h(start) for start in self.starts)
        while bound <= limit:
            if not self.round(bound, limit):
                return None  # budget spent: nothing proven
            if self.ends:
                self.result.complete = True
                return bound
            bound = self.next_bound  # beyond ``limit`` when no path was cut: out of reach
        self.result.complete = True
        return None

    def round(self, bound: int, limit: int) -> bool:
        """Explore every path of at most ``bound`` moves from every start; False once the
        budget is spent."""
        self.bound = bound
        self.next_bound = limit + 1  # the smallest cost beyond the bound
        self.seen = {}
        for start, path in self.starts.items():
            self.path = list(path)
            if not self.walk(start, 0):
                return False
        return True

    def walk(self, state: State, g: int) -> bool:
        """Explore from ``state`` reached in g moves; False once the budget is spent."""
        result = self.result
        result.visits += 1
        if result.visits > self.max_visits:
            return False
        f = g + self.h(state)
        if f > self.bound:
            self.next_bound = min(self.next_bound, f)
            return True
        if g == self.bound:
            if within(self.goal, state[0]):
                self.ends.setdefault(state, list(self.path))
            return True
        if self.seen.get(state, self.bound + 1) <= g:
            return True  # the same continuations were explored from an earlier visit
        self.seen[state] = g
        counts, movable = state
        problem = self.problem
        per_views = [domain_counts(view, counts) for view in problem.views]
        for source in range(len(counts)):
            if movable[source] == 0:
                continue
            left = list(counts)
            left[source] -= 1
            still = list(movable)
            still[source] -= 1
            left_movable = tuple(still)
            for view, per_domain in zip(problem.views, per_views, strict=True):
                per_domain[view.domain_of[source]] -= 1
            targets = legal_targets(problem, left, source, per_views)
            for view, per_domain in zip(problem.views, per_views, strict=True):
                per_domain[view.domain_of[source]] += 1
            for target in targets:
                moved = list(left)
                moved[target] += 1
                if self.keep and not within(problem.views, moved):
                    continue  # a further move never takes a hard view above its maxSkew
                self.path.append((source, target))
                ok = self.walk((tuple(moved), left_movable), g + 1)
                self.path.pop()
                if not ok:
                    return False
        return True


def search(problem: JointProblem, max_visits: int = MAX_VISITS) -> JointResult:
    """The joint minimum and every end state that reaches it (IDA* with a transposition
    table; see the module docstring)."""
    result = JointResult(minimum=None, complete=False)
    start: State = (problem.start, problem.movable)
    run = _Deepening(
        problem, problem.views, {start: []}, result, ends=result.ends, max_visits=max_visits
    )
    result.minimum = run.deepen(sum(problem.movable))
    return result


def _reachable(problem: JointProblem, view: JointView) -> bool:
    """A necessary condition for the view to end within maxSkew: each domain d can hold at
    most u_d pods (what its nodes can take, or keep when they take none; 0 for a domain of no
    modelled node), so the global minimum stays at most U = min u_d, every domain at most
    U + maxSkew, and all the pods must fit: N <= sum of min(u_d, U + maxSkew)."""
    most = [0] * view.domains
    for node, start in enumerate(problem.start):
        most[view.domain_of[node]] += problem.cap[node] if problem.accepts[node] else start
    ceiling = min(most) + view.max_skew
    return sum(problem.start) <= sum(min(u, ceiling) for u in most)


def search_then_soft(problem: JointProblem, max_visits: int = MAX_VISITS) -> JointResult:
    """The hard views' joint minimum H (:func:`search`), then the fewest further moves F that
    bring the soft views within maxSkew as well, keeping the hard views within: ``minimum`` is
    H + F, ``hard`` is H, ``ends`` the end states after H + F moves with their paths (the
    first H moves of each path balance the hard views). ``minimum`` is None when either goal
    is out of reach or the budget runs out (``hard`` then says whether the first was met)."""
    first = search(problem, max_visits)
    if first.minimum is None or not problem.soft:
        first.hard = first.minimum
        return first
    result = JointResult(minimum=None, complete=False, visits=first.visits, hard=first.minimum)
    if not all(_reachable(problem, view) for view in problem.soft):
        result.complete = True
        return result
    run = _Deepening(
        problem, problem.soft, first.ends, result, ends={}, max_visits=max_visits, keep=True
    )
    further = run.deepen(sum(next(iter(first.ends))[1]))  # every end has as many left
    if further is not None:
        result.minimum = first.minimum + further
        result.ends = run.ends
    return result
