import os
import tempfile

from pyspark.sql import SparkSession
from sklearn.datasets import load_digits

from sparkdl import TFCluster
from sparkdl.inference import predict_batch_udf


def main_fun(args, ctx):  # runs on each TF node, TF_CONFIG set
    import keras
    import tensorflow as tf

    with tf.distribute.MultiWorkerMirroredStrategy().scope():
        model = keras.Sequential([keras.Input([64]), keras.layers.Dense(64, "relu"), keras.layers.Dense(10, "softmax")])
        model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    train = ctx.get_data_feed().as_dataset(batch_size=64, features="pixels", label="label")
    model.fit(train, epochs=args["epochs"], verbose=0, callbacks=[ctx.progress_callback()])  # progress: on the driver
    with ctx.export_path(args["model"]) as path:  # every node saves; the chief's copy is kept
        model.save(path)


spark = SparkSession.builder.master("local-cluster[2,1,1024]").getOrCreate()
rows = [((x / 16).tolist(), int(y)) for x, y in zip(*load_digits(return_X_y=True))]
df = spark.createDataFrame(rows, "pixels array<float>, label long")
args = {"epochs": 10, "model": os.path.join(tempfile.mkdtemp(), "digits.keras")}
cluster = TFCluster.run(spark.sparkContext, main_fun, args, 2, input_mode=TFCluster.InputMode.SPARK)
cluster.train(df, num_epochs=args["epochs"])
cluster.shutdown()
scored = df.withColumn("probs", predict_batch_udf(model=args["model"], batch_size=256)("pixels"))
right = scored.where("array_position(probs, array_max(probs)) - 1 = label").count()
print(f"accuracy: {right / df.count():.3f}")
spark.stop()
