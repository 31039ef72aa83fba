"""The pods' LISTs asked for in protobuf: the reader's transports over the API adapter's bytes.

The API adapter (:class:`~rebalancer.cluster.api.kubeclient.Kube`) sends requests and hands
back bytes with their media type; which encoding to ask for, whether the answer is in it, and
how to read an error answer in protobuf is decided here, beside the decoder
(:mod:`rebalancer.cluster.read.protodecode`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from rebalancer.cluster.api import errors
from rebalancer.cluster.api.kubeclient import Kube
from rebalancer.cluster.api.resources import RESOURCES_BY_NAME
from rebalancer.cluster.read import protodecode
from rebalancer.cluster.read.protodecode.stream import StreamDeclined

__all__ = ["protobuf_pages", "protobuf_stream", "status_of"]


def status_of(body: bytes) -> Mapping[str, Any] | None:
    """An error answer in protobuf as its Status's JSON fields; None when it is not protobuf."""
    return protodecode.status_body(body) if protodecode.is_protobuf(body) else None


def protobuf_pages(kube: Kube) -> Callable[[str, str | None, int, str | None], bytes]:
    """``list_page_proto(resource, namespace, limit, token) -> bytes``: one page of a LIST
    asking for protobuf (kube-apiserver encodes it for a fifth of the CPU JSON costs): the
    body as sent, protobuf (it starts with :data:`~.protodecode.MAGIC`) when the answer's
    Content-Type says so, otherwise JSON (a server or proxy may answer JSON whatever was
    asked); a body that does not match its Content-Type is an error."""

    def list_page_proto(
        resource: str, namespace: str | None, limit: int, continue_token: str | None
    ) -> bytes:
        accept = protodecode.ACCEPT
        media, body = kube.list_page_as(
            resource, namespace, limit, continue_token, accept=accept, status_of=status_of
        )
        if (media == protodecode.PROTOBUF) != protodecode.is_protobuf(body):
            raise errors.ClusterError(
                f"LIST {RESOURCES_BY_NAME[resource].rbac_name}: the answer's body does not "
                f"match its Content-Type {media or '(none)'}"
            )
        return body

    return list_page_proto


def protobuf_stream(kube: Kube) -> Callable[[str, str | None], Iterator[bytes]]:
    """``list_stream(resource, namespace) -> chunks``: one unpaginated LIST asking for
    protobuf, its body as it arrives (:meth:`~rebalancer.cluster.api.kubeclient.Kube.
    list_stream`); an answer in JSON raises :class:`StreamDeclined` before its body is read."""

    def list_stream(resource: str, namespace: str | None) -> Iterator[bytes]:
        try:
            chunks = kube.list_stream(
                resource,
                namespace,
                accept=protodecode.ACCEPT,
                expect=protodecode.PROTOBUF,
                status_of=status_of,
            )
            try:
                yield from chunks
            finally:
                chunks.close()
        except errors.UnexpectedMediaType as exc:
            raise StreamDeclined(str(exc)) from exc

    return list_stream
