"""Schemas side by side: Spark's ``StructType(StructField(...))`` text (as its errors print schemas) and the
checkpoint's schema files, both as ``name: type`` fields in Spark SQL's type names, then field by field."""
from __future__ import annotations

from wmcheck.statestore.formats.schema import ArrayType, DataType, MapType, StructType
from wmcheck.statestore.spark.compat.results import FieldChange

Fields = tuple[tuple[str, str, bool], ...]
"""(name, SQL type, nullable) per field."""

_ATOMS = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint", "null": "void"}
_CLASS_ATOMS = {"LongType": "bigint", "IntegerType": "int", "ShortType": "smallint", "ByteType": "tinyint",
                "StringType": "string", "BooleanType": "boolean", "DoubleType": "double", "FloatType": "float",
                "TimestampType": "timestamp", "TimestampNTZType": "timestamp_ntz", "DateType": "date",
                "BinaryType": "binary", "NullType": "void", "CalendarIntervalType": "interval"}


def sql_type(data_type: DataType) -> str:
    """A schema file's type as Spark SQL names it (``bigint``, ``struct<start:timestamp,end:timestamp>``)."""
    if isinstance(data_type, str):
        return _ATOMS.get(data_type, data_type)
    if isinstance(data_type, StructType):
        return "struct<" + ",".join(f"{f.name}:{sql_type(f.data_type)}" for f in data_type.fields) + ">"
    if isinstance(data_type, ArrayType):
        return f"array<{sql_type(data_type.element_type)}>"
    if isinstance(data_type, MapType):
        return f"map<{sql_type(data_type.key_type)},{sql_type(data_type.value_type)}>"
    return str(data_type.json.get("type", "unknown"))


def struct_fields(schema: StructType) -> Fields:
    return tuple((f.name, sql_type(f.data_type), f.nullable) for f in schema.fields)


class _Text:
    """A cursor over Spark's ``toString`` of a ``StructType``."""

    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def expect(self, token: str) -> None:
        if not self.text.startswith(token, self.at):
            raise ValueError(f"expected {token!r} at {self.at}")
        self.at += len(token)

    def until(self, stops: str) -> str:
        start = self.at
        while self.at < len(self.text) and self.text[self.at] not in stops:
            self.at += 1
        return self.text[start:self.at]

    def data_type(self) -> str:
        if self.text.startswith("StructType(", self.at):
            return "struct<" + ",".join(f"{n}:{t}" for n, t, _ in self.struct()) + ">"
        if self.text.startswith("ArrayType(", self.at):
            self.expect("ArrayType(")
            element = self.data_type()
            self.expect(",")
            self.flag()
            self.expect(")")
            return f"array<{element}>"
        if self.text.startswith("MapType(", self.at):
            self.expect("MapType(")
            key = self.data_type()
            self.expect(",")
            value = self.data_type()
            self.expect(",")
            self.flag()
            self.expect(")")
            return f"map<{key},{value}>"
        word = self.until(",)(")
        if not word.endswith("Type"):
            raise ValueError(f"not a type: {word!r}")
        if self.text.startswith("(", self.at):  # DecimalType(10,2), DayTimeIntervalType(0,3), CharType(5), ...
            self.expect("(")
            args = self.until(")")
            self.expect(")")
            return "string" if word == "StringType" else f"{word[:-4].lower()}({args})"
        return _CLASS_ATOMS.get(word, word[:-4].lower())

    def flag(self) -> bool:
        flag = self.until(",)")
        if flag not in ("true", "false"):
            raise ValueError(f"not a nullable flag: {flag!r}")
        return flag == "true"

    def struct(self) -> Fields:
        self.expect("StructType(")
        fields = []
        while not self.text.startswith(")", self.at):
            self.expect("StructField(")
            name = self.until(",")
            self.expect(",")
            data_type = self.data_type()
            self.expect(",")
            nullable = self.flag()
            self.expect(")")
            fields.append((name, data_type, nullable))
            if self.text.startswith(",", self.at):
                self.at += 1
        self.expect(")")
        return tuple(fields)


def parse_struct_text(text: str) -> Fields | None:
    """Spark's ``StructType(StructField(a,LongType,true),...)`` as fields; None when it does not parse
    (a field name with a comma or a parenthesis)."""
    try:
        cursor = _Text(text.strip())
        fields = cursor.struct()
        return fields if cursor.at == len(cursor.text) else None
    except (ValueError, IndexError):
        return None


def render(fields: Fields) -> str:
    return ", ".join(f"{name}: {data_type}{'' if nullable else ' not null'}" for name, data_type, nullable in fields)


def side_by_side(old: Fields, new: Fields) -> tuple[FieldChange, ...]:
    """Every field of either schema, matched by name (old order, then the new ones), with what changed."""
    before = {name: (t, n) for name, t, n in old}
    after = {name: (t, n) for name, t, n in new}
    out = []
    for name in [n for n, _, _ in old] + [n for n, _, _ in new if n not in before]:
        a, b = before.get(name), after.get(name)
        text_a = a[0] if a else None
        text_b = b[0] if b else None
        if a is None:
            change = "added"
        elif b is None:
            change = "removed"
        elif a[0] != b[0]:
            change = "type"
        elif a[1] != b[1]:
            change = "nullable"
            text_a, text_b = f"{a[0]}{'' if a[1] else ' not null'}", f"{b[0]}{'' if b[1] else ' not null'}"
        else:
            change = "same"
        out.append(FieldChange(name, text_a, text_b, change))
    return tuple(out)
