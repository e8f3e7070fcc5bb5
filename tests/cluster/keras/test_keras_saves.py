"""tf-keras ``.keras`` saves from any thread, with TensorFlow (sparkdl.keras without it:
tests/unit/keras/ (a test file per module))."""

from __future__ import annotations

import pytest


@pytest.mark.cluster  # imports TensorFlow
@pytest.mark.timeout(120)
def test_tf_keras_models_save_as_keras_zips_in_any_thread(tmp_path):
    """Regression: in a thread other than the one that imported tf-keras (CrossValidator fits in a
    worker thread), tf-keras' second ``.keras`` save wrote HDF5 under that name, and scoring the
    fitted model then failed with "File not found". sparkdl's saves, and (in local mode)
    ModelCheckpoint's, must write zips there too."""
    import threading
    import zipfile

    from sparkdl import compat
    from sparkdl.keras.shipping import keep_tf_keras_saves_zipped, ship

    import keras_functions

    written, errors = [], []

    def fit_thread():
        try:
            model = keras_functions.mlp(0.01, hidden=4, inputs=4)
            ship(model)  # a first save in this thread (the payload for the nodes)
            compat.save_keras_file(model, str(tmp_path / "model.keras"))
            compat.export_saved_model(model, str(tmp_path / "export.keras"), is_chief=True)
            keep_tf_keras_saves_zipped("tf_keras")
            model.save(str(tmp_path / "best.keras"))  # what ModelCheckpoint calls
            written.extend(["model.keras", "export.keras", "best.keras"])
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    worker = threading.Thread(target=fit_thread)
    worker.start()
    worker.join(100)
    assert not errors, errors
    assert written and all(zipfile.is_zipfile(tmp_path / name) for name in written), written
