-- tlindex schema, migration 016: secrets redacted from what `tlindex run` stored before it redacted them at the
-- door (tlindex/store/redact.py: an option's value whose name says it is a secret, a URL's password, HF_TOKEN=...),
-- in the command lines and in the labels made of them. A label that would then equal another run's gets its id.
-- The space the old values took is overwritten with zeros (for this connection), not left in the file.
PRAGMA secure_delete = ON;

UPDATE runs SET command = tlindex_redact_command(command)
WHERE command IS NOT NULL AND command IS NOT tlindex_redact_command(command);

UPDATE runs SET label = tlindex_redact(label) || CASE WHEN EXISTS (
    SELECT 1 FROM runs other WHERE other.id != runs.id AND tlindex_redact(other.label) = tlindex_redact(runs.label))
  THEN ' (run ' || id || ')' ELSE '' END
WHERE label IS NOT tlindex_redact(label);
