"""``explain`` of a pod the snapshot does not hold names the pods it may have meant, at a cost
that does not grow with the cluster beyond one pass over its names.

The oracle is difflib itself run over every name (brute force), which the bounded search must
agree with where a typo or a cut keeps the name's start or end; the cost is the number of names
compared in full, at three sizes of a hostile namespace whose names all share 200 characters.

Measured (``python -m bench.nearest``, 2 shared cores, loaded; names of 218 characters alike
in their first 207, as below): 15,000 names 0.31 s, 50,000 0.37 s, 150,000 0.86 s, at most 500
compared in full at each size, peak RSS 120 MiB. Before, ``explain`` of an unknown pod of the
30,000-pod cluster made the whole plan first and then said only "not in the snapshot" (12.6 s,
exit 2; now 9.3 s, exit 2, naming the pod meant).
"""

from __future__ import annotations

import difflib
import random
from pathlib import Path

import pytest

from rebalancer.cli.kubectl_plugin import main as kubectl_main
from rebalancer.cli.main import main
from rebalancer.core.model import Snapshot
from rebalancer.core.nearest import CUTOFF, SHORTLIST, nearest, nearest_pods, shortlist
from tests.builders import node, pod

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = str(ROOT / "examples" / "skewed-cluster.yaml")
POD = "shop/web-vchvtjw47k-j5f5v"  # in the example snapshot
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _names(count: int, seed: int) -> list[str]:
    """Pod names as a ReplicaSet writes them: workload, template hash, random suffix."""
    rng = random.Random(seed)

    def part(n: int) -> str:
        return "".join(rng.choice(ALPHABET) for _ in range(n))

    hashes = [part(9) for _ in range(max(1, count // 30))]
    return sorted(
        {f"svc-{i % len(hashes)}-{hashes[i % len(hashes)]}-{part(5)}" for i in range(count)}
    )


def _ratio(word: str, name: str) -> float:
    return difflib.SequenceMatcher(None, word, name).ratio()


@pytest.mark.parametrize("count", [300, 3_000, 10_000])
def test_a_typo_or_a_cut_finds_what_brute_force_finds(count: int) -> None:
    """A name with one character changed near its start or its end, or cut in its middle with
    an ellipsis: the first suggestion is as close (difflib's ratio) as the closest of all the
    names, compared one by one; it is the name itself where that is the single closest."""
    names = _names(count, count)
    rng = random.Random(7)
    for target in rng.sample(names, 6):
        at = rng.choice([1, 2, len(target) - 2, len(target) - 1])
        typo = target[:at] + ("a" if target[at] != "a" else "e") + target[at + 1 :]
        cut = target[:5] + "\u2026" + target[-10:]
        for word in (typo, cut):
            scores = {name: _ratio(word, name) for name in names}
            best = max(scores.values())
            found = nearest(word, names)
            assert found, word
            assert scores[found[0]] == best, (word, found, best)
            if [n for n, r in scores.items() if r == best] == [target]:
                assert found[0] == target


def test_few_names_are_all_compared() -> None:
    """With no more names than the shortlist holds, the answer is difflib's over all of them."""
    names = _names(SHORTLIST, 3)
    for word in ("svc-1", "svc-12-x", names[17][:-1], "zzz"):
        assert nearest(word, names) == difflib.get_close_matches(word, names, 3, CUTOFF)


@pytest.mark.parametrize("count", [1_000, 10_000, 100_000])
def test_the_names_compared_in_full_are_bounded(count: int) -> None:
    """A hostile namespace: every name the same 200 characters, a number and a random suffix.
    At each size at most SHORTLIST names reach difflib, and the one a typo came from is still
    found first."""
    rng = random.Random(count)
    suffix = ["".join(rng.choice(ALPHABET) for _ in range(6)) for _ in range(count)]
    names = [f"web-{'x' * 200}-{i:06d}-{suffix[i]}" for i in range(count)]
    target = names[count // 2]
    word = target[:-1] + "A"
    short = shortlist(word, names)
    assert len(short) <= SHORTLIST
    assert target in short
    assert nearest(word, names)[0] == target


def test_pods_are_suggested_from_the_namespace_or_its_nearest() -> None:
    """The same name in another namespace comes first; a misspelt namespace is searched as the
    namespaces closest to it; nothing alike: no suggestion."""
    nodes = (node("n1", "a"),)
    pods = tuple(
        pod(name, "n1", namespace=ns)
        for ns, name in [
            ("shop", "web-6d9f8-abcde"),
            ("shop", "web-6d9f8-fghij"),
            ("payments", "worker-77c4-xyz12"),
            ("data", "web-6d9f8-abcde"),
        ]
    )
    snapshot = Snapshot(nodes=nodes, pods=pods)
    assert nearest_pods(snapshot, "default", "web-6d9f8-abcde")[:2] == [
        "shop/web-6d9f8-abcde",
        "data/web-6d9f8-abcde",
    ]
    assert nearest_pods(snapshot, "shop", "web-6d9f8-abcdf")[0] == "shop/web-6d9f8-abcde"
    assert nearest_pods(snapshot, "paymnts", "worker-77c4-xyz12") == ["payments/worker-77c4-xyz12"]
    assert nearest_pods(snapshot, "shop", "qqqq") == []


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("shop/web-vchvtjw47k-j5f5x", POD),  # a typo at its end
        ("shop/web-vc\u2026k-j5f5v", POD),  # cut in its middle, as a narrow table once did
        ("sop/web-vchvtjw47k-j5f5v", POD),  # a misspelt namespace
        ("default/web-vchvtjw47k-j5f5v", POD),  # the wrong namespace
    ],
)
def test_explain_of_an_unknown_pod_suggests_the_nearest(
    capsys: pytest.CaptureFixture[str], typed: str, meant: str
) -> None:
    """``rebalancer explain`` and ``kubectl rebalance explain`` of a pod that is not there exit
    2 and say which pod was likely meant, nearest first."""
    assert main(["explain", "--snapshot", SNAPSHOT, "--pod", typed]) == 2
    err = capsys.readouterr().err
    assert f"is not in the snapshot; did you mean {meant}" in err
    assert kubectl_main(["explain", typed, "--snapshot", SNAPSHOT]) == 2
    assert f"did you mean {meant}" in capsys.readouterr().err


def test_explain_of_a_pod_like_none_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing close: the error says so instead of suggesting a stranger."""
    assert main(["explain", "--snapshot", SNAPSHOT, "--pod", "zz/qqqqqqqq"]) == 2
    assert "zz/qqqqqqqq is not in the snapshot; no pod has a name close to it" in (
        capsys.readouterr().err
    )
