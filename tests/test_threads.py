"""Concurrent use: the processor never changes the shared tokenizer, so mixed calls from threads stay correct."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import contextembed

LITERAL = "the lease says <|chunk_sep|> and [SEP] in its text"


def run_threads(*targets, repeats: int):
    errors: list[BaseException] = []

    def loop(target):
        try:
            for _ in range(repeats):
                target()
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=loop, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


@pytest.mark.parametrize("attempt", range(3))
def test_processor_and_plain_tokenizer_calls_in_two_threads(built, attempt):
    processor = built["bert"][2]
    tokenizer = processor.tokenizer
    separator = processor.chunk_token_id
    expected_row = processor.tokenize_documents([[LITERAL, "rent"]])[0]
    assert expected_row["input_ids"].count(separator) == 1  # the one the processor inserted
    expected_plain = tokenizer(LITERAL)["input_ids"]
    assert separator in expected_plain  # with its defaults the tokenizer reads the literal as the special token

    def documents():
        assert processor.tokenize_documents([[LITERAL, "rent"]])[0] == expected_row

    def plain():
        assert tokenizer(LITERAL)["input_ids"] == expected_plain

    run_threads(documents, plain, documents, plain, repeats=300)


def test_encoders_in_threads_match_serial_calls(built):
    encoder = contextembed.load(str(built["bert"][0]))
    docs = [[LITERAL, "rent is two", "she is the tenant"], ["one"], [f"chunk {i}" for i in range(30)]]
    queries = ["who is the tenant", LITERAL]
    serial_docs = encoder.encode_documents(docs)
    serial_queries = encoder.encode_queries(queries)

    def documents():
        for a, b in zip(serial_docs, encoder.encode_documents(docs)):
            assert np.abs(a - b).max() <= 1e-6

    def queries_():
        assert np.abs(serial_queries - encoder.encode_queries(queries)).max() <= 1e-6

    def plain():
        assert encoder.processor.tokenizer(LITERAL, add_special_tokens=False)["input_ids"]

    run_threads(documents, queries_, plain, repeats=10)
