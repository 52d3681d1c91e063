from mallocgame.nested import nested_leaves


def test_leaves_in_order_depth_first():
    value = (1, [2, "a", (3, [4])], "b", 5)
    assert nested_leaves(value, lambda v: isinstance(v, int)) == [1, 2, 3, 4, 5]


def test_a_leaf_alone_and_an_empty_nest():
    assert nested_leaves(7, lambda v: isinstance(v, int)) == [7]
    assert nested_leaves("x", lambda v: isinstance(v, int)) == []
    assert nested_leaves([(), []], lambda v: True) == []


def test_dicts_are_leaves_not_nests():
    d = {"a": 1}
    assert nested_leaves([d, 2], lambda v: isinstance(v, dict)) == [d]
