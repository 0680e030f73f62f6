"""How a RocksDB store's values were encoded, told from their bytes (checkpoint.value_encoding)."""
from __future__ import annotations

from wmcheck.statestore.encodings.value_encoding import AVRO, UNSAFE_ROW, unsafe_row_value, written_encoding

ROW = bytes.fromhex("00" + "00" * 8 + "0200000000000000")  # a version byte, then an UnsafeRow of one long
LISTED = (25).to_bytes(4, "little") + bytes(25)  # a list state's element: its size, then a version byte and 24 bytes


def test_an_unsafe_row_value_is_a_version_byte_and_whole_words():
    assert unsafe_row_value(ROW)
    assert not unsafe_row_value(ROW[:-1])
    assert not unsafe_row_value(b"\x01" + ROW[1:])  # another version
    assert not unsafe_row_value(bytes(1))  # no null bit set


def test_a_list_states_value_is_elements_after_their_sizes():
    assert unsafe_row_value(LISTED)
    assert unsafe_row_value(LISTED * 3)
    assert not unsafe_row_value(LISTED + LISTED[:-1])
    assert not unsafe_row_value((26).to_bytes(4, "little") + bytes(26))


def test_avro_values_as_avro_tws_holds_them_do_not_fit():
    for value in ("0000000204", "000000", "0000000280a4f185e2f58606", "0e0000000000000280d1d38ae2f586060208"):
        assert not unsafe_row_value(bytes.fromhex(value))


def test_the_encoding_is_named_only_when_every_value_agrees():
    assert written_encoding([ROW, LISTED, b""]) == UNSAFE_ROW
    assert written_encoding([bytes.fromhex("0000000204"), bytes.fromhex("000000")]) == AVRO
    assert written_encoding([ROW, bytes.fromhex("000000")]) is None
    assert written_encoding([b""]) is None
    assert written_encoding([]) is None
