// unit tests below
