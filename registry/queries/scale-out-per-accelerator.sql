-- Backend (scale-out) NICs, speed per NIC and bandwidth per accelerator, each with its status.
SELECT n.reference_id, n.value_number AS nics, n.status AS nics_status, s.value_number AS nic_speed, s.unit AS nic_unit,
       s.direction, p.value_number AS per_accelerator, p.status AS per_accelerator_status, pr.value_text AS protocol
FROM fields n
JOIN fields s ON s.reference_id = n.reference_id AND s.field = 'scale_out.nic.speed'
JOIN fields p ON p.reference_id = n.reference_id AND p.field = 'scale_out.bandwidth_per_accelerator'
JOIN fields pr ON pr.reference_id = n.reference_id AND pr.field = 'scale_out.protocol'
WHERE n.field = 'scale_out.nic.count'
ORDER BY n.reference_id;
