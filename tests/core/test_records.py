"""The shared repr/eq/hash of pmca's records behave as the ones attrs generates."""

from __future__ import annotations

import pickle

import attrs
import pytest
from attrs import define, field, frozen

from pmca._records import FrozenValue, Record, Value


def _twins(kind: str) -> tuple[type, type]:
    """The same record twice: attrs' generated methods, and the shared ones."""
    if kind == "frozen":

        @frozen
        class Generated:
            x: int
            hidden: str = field(default="h", repr=False)
            ignored: list[int] = field(factory=list, eq=False)
            folded: str = field(default="A", eq=str.lower)
            later: int = field(init=False, default=3)

        @frozen(eq=False, repr=False)
        class Shared(FrozenValue):
            x: int
            hidden: str = field(default="h", repr=False)
            ignored: list[int] = field(factory=list, eq=False)
            folded: str = field(default="A", eq=str.lower)
            later: int = field(init=False, default=3)

        return Generated, Shared

    @define
    class GeneratedMutable:
        x: int
        other: object = field(default=None, repr=lambda v: "<other>" if v else "none")
        itself: object = None

    @define(eq=False, repr=False)
    class SharedMutable(Value):
        x: int
        other: object = field(default=None, repr=lambda v: "<other>" if v else "none")
        itself: object = None

    return GeneratedMutable, SharedMutable


def _name_free(text: str) -> str:
    return text.split("(", 1)[1]


@pytest.mark.parametrize("kind", ["frozen", "define"])
def test_repr_is_attrs_repr(kind: str) -> None:
    generated, shared = _twins(kind)
    a, b = generated(1), shared(1)
    assert repr(b).startswith(shared.__name__ + "(")
    assert _name_free(repr(a)) == _name_free(repr(b))
    if kind == "define":  # a record that contains itself
        a.itself, b.itself = a, b
        a.other, b.other = 1, 1
        assert _name_free(repr(a)) == _name_free(repr(b))
        assert "itself=..." in repr(b) and "other=<other>" in repr(b)


def test_frozen_equality_and_hash_follow_the_field_options() -> None:
    generated, shared = _twins("frozen")
    for cls in (generated, shared):
        assert cls(1) == cls(1, ignored=[5]) and hash(cls(1)) == hash(cls(1, ignored=[5]))
        assert cls(1, folded="abc") == cls(1, folded="ABC")
        assert cls(1) != cls(2) and cls(1, hidden="a") != cls(1, hidden="b")
        assert cls(1) != (1, "h") and len({cls(1), cls(1), cls(2)}) == 2
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            cls(1).x = 2  # type: ignore[misc]
        assert attrs.evolve(cls(1), x=2) == cls(2)
    assert generated(1) != shared(1)  # different classes never compare equal


def test_mutable_values_are_unhashable_and_records_are_identities() -> None:
    generated, shared = _twins("define")
    for cls in (generated, shared):
        assert cls(1) == cls(1) and cls(1) != cls(2)
        with pytest.raises(TypeError):
            hash(cls(1))

    @define(eq=False, repr=False)
    class Identity(Record):
        x: int

    one = Identity(1)
    assert one != Identity(1) and one == one and {one: 1}[one] == 1
    assert repr(one) == "Identity(x=1)"


def test_pmca_records_keep_their_repr_and_equality() -> None:
    import pmca
    from pmca.mca._names import Version
    from pmca.mca.params import Origin, Source

    query = pmca.Query(priority=3, module=None)
    assert repr(query) == "Query(priority=3, module=None)"
    assert query == pmca.Query(priority=3, module=None) and len({query, query}) == 1
    assert Version.parse("1.2.3", what="test") < Version.parse("1.10.0", what="test")
    origin = Origin(Source.ENV, "PMCA_MCA_x")
    assert pickle.loads(pickle.dumps(origin)) == origin
    assert repr(origin) == (f"Origin(source={Source.ENV!r}, detail='PMCA_MCA_x')")
