-- idemstore's grants: the runtime role and the two operator roles (one lists
-- and counts; the other also resolves, extends and deletes scopes and runs
-- cleanup). docs/operations.md, section 2, says why each one; with the default
-- names below this file is exactly the page's runtime-grants and
-- operator-grants blocks (internal/doctest checks it, and runs it).
--
-- Run it after every `migrate up`, as the schema's owner (idem_migrator); every
-- statement is idempotent. psql variables name the schema and the roles:
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f deploy/grants.sql
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -v schema=tenant_a -v app_role=svc_agent -f deploy/grants.sql
\if :{?schema}
\else
  \set schema idemstore
\endif
\if :{?app_role}
\else
  \set app_role idem_app
\endif
\if :{?ops_read_role}
\else
  \set ops_read_role idem_ops_read
\endif
\if :{?ops_role}
\else
  \set ops_role idem_ops
\endif

-- The runtime role (runtime-grants).
GRANT USAGE ON SCHEMA :"schema" TO :"app_role";
GRANT SELECT, INSERT, UPDATE, DELETE ON :"schema".idem_records, :"schema".idem_scopes TO :"app_role";
GRANT USAGE ON SEQUENCE :"schema".idem_token_seq TO :"app_role";
GRANT SELECT ON :"schema".idem_goose_version TO :"app_role";

-- The operator roles (operator-grants).
GRANT USAGE ON SCHEMA :"schema" TO :"ops_read_role", :"ops_role";
GRANT SELECT ON :"schema".idem_records, :"schema".idem_scopes, :"schema".idem_goose_version TO :"ops_read_role", :"ops_role";
GRANT UPDATE, DELETE ON :"schema".idem_records TO :"ops_role";
GRANT INSERT, UPDATE, DELETE ON :"schema".idem_scopes TO :"ops_role";
GRANT USAGE ON SEQUENCE :"schema".idem_token_seq TO :"ops_role";
