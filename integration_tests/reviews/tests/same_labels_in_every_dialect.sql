-- The same AI_CLASSIFY in Snowflake, BigQuery and Databricks syntax gives the same labels.
select s.id, s.sentiment as snowflake, b.sentiment as bigquery, d.sentiment as databricks
from {{ ref('sf_sentiment') }} as s
join {{ ref('bq_sentiment') }} as b using (id)
join {{ ref('dbx_sentiment') }} as d using (id)
where s.sentiment is distinct from b.sentiment
   or s.sentiment is distinct from d.sentiment
