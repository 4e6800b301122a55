{#- Fails (one row per offending label) when any one value of `column_name` holds more than
    `max_share` of the model's rows, or, with `min_share`, fewer than `min_share` of them.
    Catches a classifier that answers the same label for everything. NULLs count as a label. -#}
{% test quail_max_label_share(model, column_name, max_share=0.8, min_share=none) %}
with label_counts as (
    select {{ column_name }} as label, count(*) as num_rows
    from {{ model }}
    group by 1
),
shares as (
    select label, num_rows, num_rows * 1.0 / sum(num_rows) over () as share
    from label_counts
)
select label, num_rows, share
from shares
where share > {{ max_share }}
{%- if min_share is not none %}
   or share < {{ min_share }}
{%- endif %}
{% endtest %}
