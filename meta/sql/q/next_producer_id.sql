SELECT nextval('producer_id_seq')
