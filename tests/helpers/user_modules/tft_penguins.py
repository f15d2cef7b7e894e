"""A TensorFlow Transform preprocessing_fn written the way TFT's own
documentation and TFX's Transform modules write one (for
tests/e2e/test_preprocessing_fn.py): a z-score, a vocabulary over a
lowercased string, bucketize, a string cross with its own vocabulary, and
tft.mean used as a constant."""

import tensorflow as tf
import tensorflow_transform as tft


def preprocessing_fn(inputs):
  island = tf.strings.lower(inputs["island"])
  mass = tf.cast(inputs["body_mass_g"], tf.float32)
  cross = tf.strings.join([inputs["species"], island], separator="_x_")
  return {
      "bill_z": tft.scale_to_z_score(inputs["bill_length_mm"]),
      "island_id": tft.compute_and_apply_vocabulary(
          island, vocab_filename="island"),
      "flipper_bucket": tft.bucketize(inputs["flipper_length_mm"],
                                      num_buckets=4),
      "species_island": tft.compute_and_apply_vocabulary(
          cross, vocab_filename="species_island"),
      "mass_centered": mass - tft.mean(mass),
      "row": tf.identity(inputs["row"]),
  }


def fails_to_trace(inputs):
  return {"x": inputs["no_such_feature"] * 2}


def fails_on_a_batch(inputs):
  """Traces, then fails on the first batch holding a heavy penguin."""
  mass = inputs["body_mass_g"]
  with tf.control_dependencies([tf.debugging.assert_less(
      mass, tf.constant(6000, tf.int64), message="too heavy")]):
    return {"mass_z": tft.scale_to_z_score(tf.cast(mass, tf.float32)),
            "row": tf.identity(inputs["row"])}


def sequence_fn(inputs):
  """For penguins grouped into sequences (tests/e2e/test_tft_sequences.py):
  per-step features arrive as RaggedTensors (batch, steps), context
  features as dense tensors."""
  mass = tf.cast(inputs["mass"], tf.float32)
  return {
      "mass_centered": mass - tft.mean(mass),
      "sex_upper_id": tft.compute_and_apply_vocabulary(
          tf.strings.upper(inputs["sex"]), vocab_filename="sex_upper"),
      "steps": mass.row_lengths(),
      "island_lower": tf.strings.lower(inputs["island"]),
  }
