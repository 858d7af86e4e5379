"""The fault families' actions: each kind's fault and heal, and the family each fault action
belongs to."""

from __future__ import annotations

from faultline.faults import FAMILIES, Actions, family_of_fault

#: family -> the fault and heal actions of every kind but those named in :data:`OWN`.
SHARED = {
    "kill": ("kill", "start"), "pause": ("pause", "resume"), "stop": ("stop", "start"),
    "partition": ("partition", "heal"), "toxics": ("toxic", "clear-toxics"), "wipe": ("wipe", "start"),
    "lose-unflushed": ("lose-unflushed", "start"), "links": ("degrade", "restore"),
    "clients": ("crash-client", "restart-client"), "clock": ("clock", "reset-clock"),
}
#: (family, kind) -> its own actions.
OWN = {("clients", "pause-consumer"): ("pause-client", "resume-client"),
       ("clients", "pause-producer"): ("pause-client", "resume-client")}


def test_each_kind_has_its_familys_actions_but_a_paused_client() -> None:
    assert set(SHARED) == set(FAMILIES)
    for family in FAMILIES.values():
        own = (k for ks in family.workload_kinds.values() for k in ks)
        for kind in (*family.kinds, *own, family.coordinator_kind or family.kinds[0]):
            assert family.actions(kind) == OWN.get((family.name, kind), SHARED[family.name]), kind
        assert family.all_actions == {Actions(*SHARED[family.name]),
                                      *(Actions(*a) for (f, _), a in OWN.items() if f == family.name)}
    assert FAMILIES["clients"].actions("crash-consumer") == ("crash-client", "restart-client")


def test_every_fault_action_of_a_family_maps_to_it_and_a_heal_to_none() -> None:
    for name, (fault, heal) in {**SHARED, **{f: a for (f, _), a in OWN.items()}}.items():
        assert family_of_fault(fault) is FAMILIES[name], fault
        assert family_of_fault(heal) is None, heal
    assert family_of_fault("wait") is None
