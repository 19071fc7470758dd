"""Kafka's primitive wire types (big-endian ints, int16-length strings, int32-length
nullable bytes, int32-count arrays) for the group protocols' metadata and assignments."""

from __future__ import annotations

import struct

from kctl.errors import ProtocolError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def i64(self, v: int) -> None:
        self.parts.append(_I64.pack(v))

    def string(self, v: str) -> None:
        raw = v.encode()
        self.i16(len(raw))
        self.parts.append(raw)

    def nullable_string(self, v: str | None) -> None:
        if v is None:
            self.i16(-1)
        else:
            self.string(v)

    def nullable_bytes(self, v: bytes | None) -> None:
        if v is None:
            self.i32(-1)
        else:
            self.i32(len(v))
            self.parts.append(v)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class Reader:
    def __init__(self, data: bytes, what: str):
        self.data = memoryview(data)
        self.pos = 0
        self.what = what

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolError(f"truncated {self.what}: needs {n} more bytes at "
                                f"byte {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def string(self) -> str:
        return bytes(self._take(self.i16())).decode()

    def nullable_string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else bytes(self._take(n)).decode()

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else bytes(self._take(n))

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.data)
