"""The typed decoders declare exactly the pod fields :mod:`rebalancer.cluster.read.podfields`
lists: the msgspec Structs of the JSON decoder and the messages of the protobuf schema."""

from __future__ import annotations

import pytest
from google.protobuf.message import Message
from msgspec import Struct

from rebalancer.cluster.read import fastdecode, podfields
from rebalancer.cluster.read.protodecode import schema_pb2 as pb

STRUCTS: dict[str, tuple[type[Struct], tuple[str, ...]]] = {
    "metadata": (fastdecode._Meta, podfields.METADATA),
    "spec": (fastdecode._Spec, podfields.SPEC),
    "volume": (fastdecode._Volume, podfields.VOLUME),
    "schedulingGroup": (fastdecode._SchedulingGroup, podfields.SCHEDULING_GROUP),
    "status": (fastdecode._Status, podfields.STATUS),
    "condition": (fastdecode._Condition, podfields.CONDITION),
    "containerStatus": (fastdecode._ContainerStatus, podfields.CONTAINER_STATUS),
}
MESSAGES: dict[str, tuple[type[Message], tuple[str, ...]]] = {
    "metadata": (pb.ObjectMeta, podfields.METADATA),
    "spec": (pb.PodSpec, podfields.SPEC),
    "volumeSource": (pb.VolumeSource, podfields.VOLUME_SOURCES),
    "schedulingGroup": (pb.PodSchedulingGroup, podfields.SCHEDULING_GROUP),
    "status": (pb.PodStatus, podfields.STATUS),
    "condition": (pb.PodCondition, podfields.CONDITION),
    "containerStatus": (pb.ContainerStatus, podfields.CONTAINER_STATUS),
    "container": (pb.Container, podfields.CONTAINER),
    "volumeMount": (pb.VolumeMount, podfields.VOLUME_MOUNT),
}


def _names(message: type[Message]) -> set[str]:
    return set(message.DESCRIPTOR.fields_by_name)


@pytest.mark.parametrize("part", sorted(STRUCTS))
def test_the_json_decoder_reads_the_declared_fields(part: str) -> None:
    struct, declared = STRUCTS[part]
    assert set(struct.__struct_encode_fields__) == set(declared)


@pytest.mark.parametrize("part", sorted(MESSAGES))
def test_the_protobuf_schema_declares_the_declared_fields(part: str) -> None:
    message, declared = MESSAGES[part]
    assert _names(message) == set(declared)


def test_a_protobuf_volume_is_its_name_and_its_source() -> None:
    """The API's JSON inlines a volume's source; its protobuf nests it in volumeSource."""
    assert _names(pb.Volume) == {"name", "volumeSource"}
    assert set(podfields.VOLUME) == {"name", *podfields.VOLUME_SOURCES}


def test_a_declaration_names_each_field_once() -> None:
    for name in dir(podfields):
        value = getattr(podfields, name)
        if name.isupper() and isinstance(value, tuple):
            assert len(set(value)) == len(value), name
