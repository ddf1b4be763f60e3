"""DLPack producer and consumer, versioned (1.x) and legacy, with ctypes structs.

Producer (:func:`export`, behind ``Tensor.__dlpack__``): builds a ``DLManagedTensorVersioned``
(capsule ``"dltensor_versioned"``) when the consumer passes ``max_version >= (1, 0)``, else a
legacy ``DLManagedTensor`` (capsule ``"dltensor"``).  The struct, its shape/strides arrays and a
reference to the tensor live in a registry keyed by the struct's address; the ``deleter``
(called by the consumer when it is done) drops that entry.  The capsule's destructor calls the
deleter only if no consumer took the capsule (it was not renamed to ``"used_..."``).

Stream synchronisation follows the DLPack protocol for CUDA: ``stream`` is the consumer's
stream (None: the legacy default stream, 1: legacy, 2: per-thread, -1: no synchronisation,
0: rejected as ambiguous); if it differs from the stream the tensor is ready on, the producer
records an event there and makes the consumer's stream wait for it.

Consumer (:func:`import_`): calls ``__dlpack__(stream=ours, max_version=(1, 0))`` (legacy call
if the producer does not accept ``max_version``), reads the struct, renames the capsule to
``"used_..."`` and keeps the producer's memory alive until the kinac tensor is collected, when it
calls the producer's deleter.  No data is copied in either direction.
"""

from __future__ import annotations

import ctypes
from ctypes import (
    POINTER,
    c_char_p,
    c_int,
    c_int32,
    c_int64,
    c_uint8,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any

from kinac.rt.cuda.tensor import KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, Tensor, dtype_of

VERSION = (1, 0)
FLAG_READ_ONLY = 1
FLAG_IS_COPIED = 2
NAME_LEGACY = b"dltensor"
NAME_VERSIONED = b"dltensor_versioned"
USED_LEGACY = b"used_dltensor"
USED_VERSIONED = b"used_dltensor_versioned"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


Deleter = ctypes.CFUNCTYPE(None, c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", Deleter)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", c_void_p),
        ("deleter", Deleter),
        ("flags", c_uint64),
        ("dl_tensor", DLTensor),
    ]


# Private function objects (``PyDLL.__getitem__`` does not cache): other libraries may set
# different argtypes on ``ctypes.pythonapi``'s shared ones.
_py = ctypes.PyDLL(None)
_new = _py["PyCapsule_New"]
_new.restype = ctypes.py_object
_new.argtypes = [c_void_p, c_char_p, c_void_p]
_is_valid = _py["PyCapsule_IsValid"]
_is_valid.restype = c_int
_is_valid.argtypes = [ctypes.py_object, c_char_p]
_get_ptr = _py["PyCapsule_GetPointer"]
_get_ptr.restype = c_void_p
_get_ptr.argtypes = [ctypes.py_object, c_char_p]
_set_name = _py["PyCapsule_SetName"]
_set_name.restype = c_int
_set_name.argtypes = [ctypes.py_object, c_char_p]
_raw_is_valid = _py["PyCapsule_IsValid"]  # for the destructor: no refcounting on a dying object
_raw_is_valid.restype = c_int
_raw_is_valid.argtypes = [c_void_p, c_char_p]
_raw_get_ptr = _py["PyCapsule_GetPointer"]
_raw_get_ptr.restype = c_void_p
_raw_get_ptr.argtypes = [c_void_p, c_char_p]

# struct address -> (struct, shape array, strides array, tensor): what the consumer borrows
_exports: dict[int, tuple[Any, Any, Any, Tensor]] = {}


@Deleter
def _deleter(addr: int | None) -> None:
    if addr:
        _exports.pop(addr, None)


def _capsule_destructor(name: bytes) -> Any:
    @ctypes.CFUNCTYPE(None, c_void_p)
    def destroy(capsule: int | None) -> None:
        if capsule and _raw_is_valid(capsule, name):
            _deleter(_raw_get_ptr(capsule, name))

    return destroy


_destroy_legacy = _capsule_destructor(NAME_LEGACY)
_destroy_versioned = _capsule_destructor(NAME_VERSIONED)
_DESTROY_LEGACY = ctypes.cast(_destroy_legacy, c_void_p).value
_DESTROY_VERSIONED = ctypes.cast(_destroy_versioned, c_void_p).value


def live_exports() -> int:
    """How many exported tensors a consumer (or an unconsumed capsule) still holds."""
    return len(_exports)


def _sync_for_consumer(t: Tensor, stream: int | None) -> None:
    if not t.is_cuda or stream == -1:
        return
    if stream == 0:
        raise ValueError(
            "DLPack: stream=0 is ambiguous for CUDA; pass 1 (legacy) or 2 (per-thread)"
        )
    consumer = 1 if stream is None else int(stream)
    if consumer != t.stream and not (consumer == 1 and t.stream == 0):
        from kinac.rt.cuda.device import order_streams

        order_streams(t.stream, consumer)


def export(
    t: Tensor,
    *,
    stream: int | None = None,
    max_version: tuple[int, int] | None = None,
    dl_device: tuple[int, int] | None = None,
    copy: bool | None = None,
) -> Any:
    """The DLPack capsule for ``t`` (see the module docstring)."""
    if dl_device is not None and tuple(dl_device) != tuple(t.device):
        raise BufferError(f"DLPack: tensor is on device {t.device}, not {tuple(dl_device)}")
    flags = FLAG_READ_ONLY if t.readonly else 0
    if copy:
        t = t.clone() if t.is_cuda else Tensor.host(t.numpy().copy())
        flags = FLAG_IS_COPIED
    _sync_for_consumer(t, stream)
    versioned = max_version is not None and tuple(max_version) >= (1, 0)
    n = len(t.shape)
    shape = (c_int64 * max(n, 1))(*t.shape)
    strides = (c_int64 * max(n, 1))(*t.strides)
    if versioned:
        m: Any = DLManagedTensorVersioned()
        m.version.major, m.version.minor = VERSION
        m.flags = flags
    else:
        m = DLManagedTensor()
    m.manager_ctx = None
    m.deleter = _deleter
    dl = m.dl_tensor
    dl.data = t.ptr
    dl.device.device_type, dl.device.device_id = t.device
    dl.ndim = n
    dl.dtype.code, dl.dtype.bits, dl.dtype.lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    dl.shape = ctypes.cast(shape, POINTER(c_int64))
    dl.strides = ctypes.cast(strides, POINTER(c_int64))
    dl.byte_offset = 0
    addr = ctypes.addressof(m)
    _exports[addr] = (m, shape, strides, t)
    if versioned:
        return _new(addr, NAME_VERSIONED, _DESTROY_VERSIONED)
    return _new(addr, NAME_LEGACY, _DESTROY_LEGACY)


class _Imported:
    """Holds a consumed DLPack tensor; calls the producer's deleter when collected."""

    __slots__ = ("addr", "deleter", "capsule_name")

    def __init__(self, addr: int, deleter: int | None, capsule_name: bytes) -> None:
        self.addr = addr
        self.deleter = deleter
        self.capsule_name = capsule_name

    def release(self) -> None:
        """Call the producer's deleter now (once)."""
        d, self.deleter = self.deleter, None
        if d:
            Deleter(d)(self.addr)

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass


def import_(obj: Any, *, stream: int = 0) -> Tensor:
    """A kinac Tensor sharing the memory of a DLPack producer or capsule (no copy)."""
    if hasattr(obj, "__dlpack__"):
        dev = tuple(obj.__dlpack_device__())
        kwargs: dict[str, Any] = {}
        if int(dev[0]) == KDL_CUDA:
            kwargs["stream"] = stream if stream not in (0, None) else 1
        try:
            cap = obj.__dlpack__(max_version=VERSION, **kwargs)
        except TypeError:
            cap = obj.__dlpack__(**kwargs)
    else:
        cap = obj
    if _is_valid(cap, NAME_VERSIONED):
        addr = _get_ptr(cap, NAME_VERSIONED)
        mv = DLManagedTensorVersioned.from_address(addr)
        if mv.version.major != VERSION[0]:
            raise BufferError(f"DLPack major version {mv.version.major} is not supported")
        dl, flags, used = mv.dl_tensor, int(mv.flags), USED_VERSIONED
        deleter = ctypes.cast(mv.deleter, c_void_p).value
    elif _is_valid(cap, NAME_LEGACY):
        addr = _get_ptr(cap, NAME_LEGACY)
        ml = DLManagedTensor.from_address(addr)
        dl, flags, used = ml.dl_tensor, 0, USED_LEGACY
        deleter = ctypes.cast(ml.deleter, c_void_p).value
    else:
        raise BufferError("not a DLPack capsule (or one already consumed)")
    n = int(dl.ndim)
    shape = tuple(int(dl.shape[i]) for i in range(n))
    strides = tuple(int(dl.strides[i]) for i in range(n)) if dl.strides else None
    dtype = dtype_of(int(dl.dtype.code), int(dl.dtype.bits), int(dl.dtype.lanes))
    device = (int(dl.device.device_type), int(dl.device.device_id))
    if device[0] == KDL_CUDA_HOST:  # pinned host memory is host memory to every reader here
        device = (KDL_CPU, 0)
    if device[0] not in (KDL_CPU, KDL_CUDA):
        raise BufferError(f"DLPack device type {device[0]} is not supported")
    ptr = int(dl.data or 0) + int(dl.byte_offset)
    if _set_name(cap, used) != 0:
        raise BufferError("could not mark the DLPack capsule as consumed")
    holder = _Imported(addr, deleter, used)
    return Tensor(
        ptr,
        shape,
        dtype,
        device=device,
        strides=strides,
        owner=holder,
        stream=stream,
        readonly=bool(flags & FLAG_READ_ONLY),
    )
