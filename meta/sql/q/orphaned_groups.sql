-- Groups with members that another agent (live or not) coordinated last:
-- the caller takes over those it now coordinates (its dead agent's, or
-- those that moved to it when agents came or went).
SELECT g.group_id FROM groups g
WHERE g.state <> 'Empty' AND g.coordinator_agent IS DISTINCT FROM $2
LIMIT $1
