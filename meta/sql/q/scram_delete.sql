DELETE FROM scram_credentials WHERE user_name = $1 AND mechanism = $2
