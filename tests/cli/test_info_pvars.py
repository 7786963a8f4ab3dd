"""``pmca info --pvars``: every declared pvar, readable, parsable and as JSON."""

from __future__ import annotations

import json
import re

#: A pvar of each framework that declares some, and what it must say.
EXPECTED = {
    "btl_tcp_bytes_sent": ("counter", "bytes", "peer"),
    "btl_self_messages_received": ("counter", "messages", "peer"),
    "btl_self_peer_failures": ("counter", "failures", "peer"),
    "btl_tcp_rdma_bytes": ("counter", "bytes", "peer"),
    "btl_tcp_streams_placed": ("counter", "messages", "peer"),
    "btl_tcp_streams_staged": ("counter", "messages", "peer"),
    "btl_tcp_native_bytes_received": ("counter", "bytes", "peer"),
    "btl_tcp_native_bytes_sent": ("counter", "bytes", "peer"),
    "btl_sm_lane_messages_sent": ("counter", "messages", "peer"),
    "btl_sm_lane_messages_received": ("counter", "messages", "peer"),
    "btl_tcp_lane_messages_sent": ("counter", "messages", "peer"),
    "btl_tcp_lane_messages_received": ("counter", "messages", "peer"),
    "memory_patcher_events_delivered": ("counter", "events", "none"),
    "memory_ucm_events_delivered": ("counter", "events", "none"),
    "memory_ucm_support": ("state", "", "none"),
    "rcache_grdma_pinned_bytes": ("highwatermark", "bytes", "cache"),
    "rcache_grdma_hits": ("counter", "registrations", "cache"),
    "p2p_base_unexpected_queue": ("highwatermark", "messages", "none"),
    "patcher_overwrite_patches_installed": ("counter", "patches", "none"),
    "pmca_session_init_time": ("timer", "seconds", "none"),
}


def test_json_lists_each_pvar_with_its_fields(cli) -> None:
    result = cli("info", "--pvars", "--json")
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert (document["schema"], document["schema_version"]) == ("pmca-info-pvars", 1)
    pvars = {p["name"]: p for p in document["pvars"]}
    for name, (klass, unit, binding) in EXPECTED.items():
        p = pvars[name]
        assert (p["class"], p["unit"], p["binding"]) == (klass, unit, binding), p
        assert 1 <= p["level"] <= 9 and p["description"]
    assert list(pvars) == sorted(pvars)
    assert all(re.fullmatch(r"[a-z][a-z0-9]*_[a-z][a-z0-9_]*", n) for n in pvars)


def test_parsable_has_one_record_per_field(cli) -> None:
    result = cli("info", "--pvars", "--parsable")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    grammar = re.compile(
        r'pvar:[a-z0-9_]+:(class|type|unit|level|binding|flags|description):("[^"]*"|[^"]*)'
    )
    assert lines and all(grammar.fullmatch(line) for line in lines), lines[:5]
    for name, (klass, unit, binding) in EXPECTED.items():
        for field, value in (("class", klass), ("unit", unit), ("binding", binding)):
            assert f"pvar:{name}:{field}:{value}" in lines


def test_readable_names_class_unit_level_and_binding(cli) -> None:
    result = cli("info", "--pvars")
    assert result.code == 0, result.err
    text = result.out
    assert re.search(r"pvar btl_tcp_bytes_sent: counter \(bytes\), level 4, per peer\n", text)
    assert re.search(r"pvar pmca_session_init_time: timer \(seconds\), level 4\n", text)
    assert "Bytes of active messages sent to the peer" in text


def test_level_narrows_the_list(cli) -> None:
    low = json.loads(cli("info", "--pvars", "--json", "--level", "2").out)["pvars"]
    assert low and all(p["level"] <= 2 for p in low)
    assert "memory_patcher_overwrites_detected" in {p["name"] for p in low}


#: An event type of each source, and its fields.
EVENTS = {
    "memory_patcher_release": ["addresses", "lengths", "kinds", "overflow"],
    "memory_patcher_overwrite": ["symbols", "foreign"],
    "memory_ucm_release": ["addresses", "lengths", "kinds", "overflow"],
    "memory_ucm_overwrite": ["symbols", "foreign"],
    "rcache_grdma_eviction": ["cache", "address", "length", "reason"],
    "btl_base_peer_failed": ["rank", "error"],
    "mca_base_component_selected": ["framework", "component", "priority"],
    "mca_base_component_failed": ["framework", "component", "hook", "error"],
}

#: The pvars added with the lookup, matching and foreign-patch counters.
MORE = {
    "rcache_grdma_fast_lookups": ("counter", "lookups", "cache"),
    "rcache_grdma_full_lookups": ("counter", "lookups", "cache"),
    "p2p_base_matching_time": ("timer", "seconds", "none"),
    "patcher_overwrite_foreign_patches_seen": ("counter", "patches", "none"),
}


def test_all_adds_every_event_type_in_each_format(cli) -> None:
    document = json.loads(cli("info", "--pvars", "--all", "--json").out)
    events = {e["name"]: e for e in document["events"]}
    for name, fields in EVENTS.items():
        assert events[name]["fields"] == fields and events[name]["description"], events[name]
        assert 1 <= events[name]["level"] <= 9
    pvars = {p["name"]: p for p in document["pvars"]}
    for name, (klass, unit, binding) in MORE.items():
        assert (pvars[name]["class"], pvars[name]["unit"], pvars[name]["binding"]) == (
            klass,
            unit,
            binding,
        )
    # Without --all, the pvars only (the document and its lines stay as they were).
    assert "events" not in json.loads(cli("info", "--pvars", "--json").out)
    lines = cli("info", "--pvars", "--all", "--parsable").out.splitlines()
    assert "event:rcache_grdma_eviction:fields:cache,address,length,reason" in lines
    assert "event:btl_base_peer_failed:level:2" in lines
    readable = cli("info", "--pvars", "--all").out
    fields = "fields cache, address, length, reason; level 5"
    assert re.search(rf"event rcache_grdma_eviction: {fields}\n", readable)
