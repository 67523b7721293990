-- Every preliminary field (announced, not shipped) and the document it rests on.
SELECT f.reference_id, f.field, f.value_number, f.value_text, f.unit, f.direction, c.source_id, c.url, c.retrieved_at
FROM fields f JOIN field_citations c USING (reference_id, field)
WHERE f.status = 'preliminary'
ORDER BY f.reference_id, f.field, c.source_id;
