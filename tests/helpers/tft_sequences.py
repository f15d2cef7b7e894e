"""What tests/e2e/test_tft_sequences.py shares with the tests split from it
(tests/unit, tests/cluster)."""


SCHEMA = {
    "name": "penguin_years",
    "record": "sequence_example",
    "group_by": ["split", "species", "island", "year"],
    "order_by": [{"column": "row", "type": "int64"}],
    "splits": {"column": "split", "values": ["train", "eval"]},
    "context": {"species": {"type": "string"},
                "island": {"type": "string"},
                "year": {"type": "int64"}},
    "sequence": {"mass": {"type": "float", "source": "body_mass_g",
                          "required": True},
                 "flipper": {"type": "int64", "source": "flipper_length_mm",
                             "required": True},
                 "sex": {"type": "string", "required": True}},
    "transform": {"keep_raw": True, "features": {
        "mass_z": {"scale_to_z_score": "mass"},
        "flipper_01": {"scale_to_0_1": "flipper"},
        "sex_id": {"compute_and_apply_vocabulary": "sex"},
        "island_id": {"compute_and_apply_vocabulary": "island"},
        "year": {"pass": "year"}}},
}
