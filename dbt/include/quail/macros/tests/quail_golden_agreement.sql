{#- Fails (one summary row) when `column_name` agrees with the golden relation's labels on fewer
    than `min_agreement` of the rows they share by `key` (case and surrounding blanks ignored),
    or when they share no row at all. -#}
{% test quail_golden_agreement(model, column_name, golden, key, golden_column=none, min_agreement=0.8) %}
{%- set golden_column = golden_column or column_name %}
with paired as (
    select
        lower(trim(cast(m.{{ column_name }} as varchar))) as predicted,
        lower(trim(cast(g.{{ golden_column }} as varchar))) as expected
    from {{ model }} as m
    join {{ golden }} as g on m.{{ key }} = g.{{ key }}
),
summary as (
    select
        count(*) as num_rows,
        count(*) filter (where predicted is not distinct from expected) as num_agree
    from paired
)
select num_rows, num_agree, num_agree * 1.0 / nullif(num_rows, 0) as agreement
from summary
where num_rows = 0 or num_agree * 1.0 / num_rows < {{ min_agreement }}
{% endtest %}
