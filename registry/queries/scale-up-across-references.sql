-- Scale-up domain size and per-accelerator scale-up bandwidth across references, with status and direction.
SELECT d.reference_id, r.kind, d.value_number AS domain_size, d.status AS domain_status,
       b.value_number AS bandwidth_per_accelerator, b.unit, b.direction, b.status AS bandwidth_status, t.value_text AS technology
FROM fields d
JOIN fields b ON b.reference_id = d.reference_id AND b.field = 'scale_up.bandwidth_per_accelerator'
JOIN fields t ON t.reference_id = d.reference_id AND t.field = 'scale_up.technology'
JOIN reference_models r ON r.reference_id = d.reference_id
WHERE d.field = 'scale_up.domain_size'
ORDER BY d.reference_id;
