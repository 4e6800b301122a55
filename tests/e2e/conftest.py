"""End-to-end fixtures: the real default model on CPU and a tiny reviews/products data set."""

import csv

import duckdb
import pytest

REVIEWS = [
    (1, "I love this blender, it works perfectly and was cheap.", 1),
    (2, "The blender broke after two days, terrible and overpriced.", 1),
    (3, "This lamp is beautiful and the price was great.", 2),
    (4, "Awful lamp, it flickers and stopped working.", 2),
    (5, "Best headphones I have ever owned, amazing sound.", 3),
    (6, None, 3),
]
PRODUCTS = [(1, "blender"), (2, "lamp"), (3, "headphones")]


@pytest.fixture(scope="session")
def engine():
    from quail_engine.infer.engine import LocalEngine

    # float32: packed and one-at-a-time runs then agree to ~1e-4 (bf16 batches may flip
    # near-ties and change a greedy decode)
    return LocalEngine.load("default", device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    with open(d / "reviews.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "review", "product_id"])
        w.writerows([(i, "" if r is None else r, p) for i, r, p in REVIEWS])
    with open(d / "products.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["product_id", "name"])
        w.writerows(PRODUCTS)
    return d


@pytest.fixture(scope="module")
def con(data_dir):
    """DuckDB with the data set as tables `reviews` (an empty review as NULL) and `products`."""
    c = duckdb.connect()
    c.execute(f"CREATE TABLE reviews AS SELECT id, NULLIF(review, '') AS review, product_id "
              f"FROM read_csv_auto('{data_dir / 'reviews.csv'}')")
    c.execute(f"CREATE TABLE products AS SELECT * FROM read_csv_auto('{data_dir / 'products.csv'}')")
    return c
