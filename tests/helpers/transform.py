"""What tests/e2e/test_transform.py shares with the tests split from it
(tests/unit, tests/cluster)."""


SCHEMA = {
    "name": "ratings",
    "splits": {"column": "split", "values": ["train", "eval"]},
    "features": {
        "user": {"type": "string", "required": True},
        "title": {"type": "string", "required": True},
        "rating": {"type": "float", "required": True},
        "ts": {"type": "int64", "required": True},
    },
    "transform": {"features": {
        "rating_z": {"scale_to_z_score": "rating"},
        "rating_01": {"scale_to_0_1": "rating"},
        "title_id": {"compute_and_apply_vocabulary": "title",
                     "num_oov_buckets": 1},
        "ts_bucket": {"bucketize": "ts", "num_buckets": 4},
        "user_hash": {"hash_strings": "user", "hash_buckets": 10},
        "rating_raw": {"pass": "rating"},
    }},
}
