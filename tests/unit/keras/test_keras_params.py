"""sparkdl.keras.params: Spark ML's camelCase names are accepted."""

import pytest

from sparkdl.keras.params import spark_ml_names

pytestmark = pytest.mark.timeout(30)


def test_spark_ml_camel_case_names_are_accepted():
    assert spark_ml_names({"predictionCol": "p", "probabilityCol": "q", "rawPredictionCol": "r", "epochs": 2}) == {
        "prediction_col": "p",
        "probability_col": "q",
        "raw_prediction_col": "r",
        "epochs": 2,
    }
