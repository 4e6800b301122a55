#!/usr/bin/env bash
# The README's main query, two trees alternately, warm (--no-cache: every answer computed; the
# converted model shared under one QUAIL_CACHE_DIR), each run's report read for its wall and
# load seconds; round 0 also converts the model, so it is left out of a comparison.
#   git archive HEAD | tar -x -C /tmp/tree_head; git archive REV | tar -x -C /tmp/tree_old
#   bash bench/readme_ab.sh      (prints: tree round wall_s load_s run_s rows loadavg)
set -u
export QUAIL_CACHE_DIR=/tmp/qc-ab DO_NOT_TRACK=1
for r in 0 1 2 3 4 5 6 7; do
  for t in head old; do
    cd /tmp/tree_$t
    PYTHONPATH=/tmp/tree_$t python -m quail_engine query examples/snowflake/reviews.sql --dialect snowflake --table reviews=examples/data/reviews.csv --quiet --no-cache --report /tmp/ab_${t}_$r.json --output /tmp/ab_${t}_$r.parquet > /dev/null 2>/tmp/ab_${t}_$r.err
    python3 -c "import json,os;d=json.load(open('/tmp/ab_${t}_$r.json'));print('$t', $r, round(d['wall_s'],2), round(d['load_s'],2), round(d['wall_s']-d['load_s'],2), d['rows'], round(os.getloadavg()[0],2))"
  done
done
