"""Java's String.hashCode and HashMap iteration order (wire/java_hash.py), on values Java gives."""

from logway.wire.java_hash import java_hash_map_order, java_string_hashcode


def test_string_hashcode_is_javas() -> None:
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("a") == 97
    assert java_string_hashcode("Aa") == java_string_hashcode("BB") == 2112
    assert java_string_hashcode("polygenelubricants") == -2147483648  # Integer.MIN_VALUE, a known Java case


def test_hash_map_order_is_by_bucket_then_insertion() -> None:
    # "" -> bucket 0, "a".."c" -> 1..3; "BB" and "Aa" collide (2112 -> bucket 0 of 16) and keep insertion order.
    assert java_hash_map_order(["c", "b", "a", ""]) == ["", "a", "b", "c"]
    assert java_hash_map_order(["BB", "c", "Aa", "BB"]) == ["BB", "Aa", "c"]


def test_hash_map_order_follows_the_table_growing() -> None:
    # 13 keys: the table doubles to 32 once a 13th entry passes 3/4 of 16; "q" (113) is bucket 1 of 16, 17 of 32.
    keys = [chr(c) for c in range(ord("a"), ord("a") + 13)] + ["q"]
    order = java_hash_map_order(keys)
    assert order[-1] == "q"
    assert java_hash_map_order(keys[:3] + ["q"]) == ["a", "q", "b", "c"]
