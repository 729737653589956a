-- One ACL; creating one that exists is not an error (Kafka's CreateAcls).
INSERT INTO acls (resource_type, resource_name, pattern_type, principal, host, operation, permission)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT DO NOTHING
