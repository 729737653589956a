UPDATE topics SET configs = $2::text::jsonb WHERE name = $1
