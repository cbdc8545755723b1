PRAGMA user_version = 11;
BEGIN TRANSACTION;
CREATE TABLE accounts (
        name TEXT PRIMARY KEY,
        role TEXT NOT NULL CHECK (role IN ('approver', 'auditor')),
        password_hash TEXT NOT NULL,
        release_limit INTEGER,
        disabled INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
CREATE TABLE approvals (
        approval_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        tool TEXT,
        args TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        run_version INTEGER NOT NULL,
        requested_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        decision TEXT,
        reviewer TEXT,
        note TEXT,
        decided_at REAL
    , approved_args TEXT);
INSERT INTO "approvals" VALUES('31038570b156','lowered',5,NULL,'{"amount_paise":180000,"item_id":"headphones-1"}','1290262f2de126ca4d12a95e241bc144e7620aa12b28d27b37c03ff50b470b6e',6,1700000010.0,1700259210.0,'approved','supervisor','lower',1700000013.0,'{"amount_paise":120000,"item_id":"headphones-1"}');
INSERT INTO "approvals" VALUES('68bc6942b8a8','declined',5,NULL,'{"amount_paise":180000,"item_id":"headphones-1"}','1290262f2de126ca4d12a95e241bc144e7620aa12b28d27b37c03ff50b470b6e',6,1700000029.0,1700259229.0,'denied','supervisor','no',1700000032.0,NULL);
CREATE TABLE artifacts (
        sha256 TEXT PRIMARY KEY,
        content TEXT NOT NULL,
        size INTEGER NOT NULL
    );
CREATE TABLE definitions (
        definition_hash TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        version TEXT NOT NULL DEFAULT '',
        body TEXT NOT NULL,
        recorded_at REAL NOT NULL
    );
INSERT INTO "definitions" VALUES('28dc253ca4e5cf27','refund','1','{"amend":"workflows.refund.workflow.lower_amount","approval_ttl_seconds":259200.0,"approve_event":"approved","deny_event":"declined","expiry_event":"expired","finish_states":[],"guards":{"cannot_verify":{"description":"get_policy said not eligible","establishes":[]},"details_complete":{"description":"the order was fetched","establishes":[]},"large_refund":{"description":"amount > ₹500 and ≤ refundable","establishes":["amount_above_limit"]},"small_refund":{"description":"amount ≤ ₹500 and ≤ refundable","establishes":["amount_within_limit"]},"verified":{"description":"get_policy said eligible","establishes":[]}},"handed_over_states":["handed_over"],"human_events":["approved","declined","expired"],"initial":"collecting","instructions":{"collecting":"Find the order the customer means and fetch it with get_order, then fire details_complete.","deciding":"Decide: small_refund or large_refund with the item and the amount in paise (at most the refundable amount), or no_refund with a reason.","refunding":"Call refund_item with exactly the decided order, item and amount.","replying":"Write the customer a short, polite reply with send_reply.","verifying":"Check the refund policy of the order with get_policy. Fire verified if the policy says eligible, cannot_verify otherwise."},"invariants":[{"kind":"ToolOnlyIn","states":["refunding"],"title":"`refund_item` runs only in `refunding`","tool":"refund_item"},{"event":"verified","kind":"OnlyThrough","state":"refunding","title":"every path into `refunding` passes through `verified`"},{"by_person":true,"event":"approved","kind":"ToolOnlyAfter","title":"`refund_item` runs only after a person fires `approved`, unless a guard established `amount_within_limit`","tool":"refund_item","unless":"amount_within_limit"},{"events":["approved","declined","expired"],"kind":"HumanOnly","title":"`approved`, `declined`, `expired` are fired only by a person"},{"kind":"AlwaysReaches","states":["done","handed_over"],"title":"every state can reach `done` or `handed_over`"},{"event":"refund_ok","kind":"AtMostOnce","title":"`refund_ok` fires at most once per run"},{"event":"refund_ok","kind":"NoReentryAfter","state":"refunding","title":"`refunding` is never entered again after `refund_ok`"},{"events":["refund_ok","refund_failed","sent"],"kind":"FiredOnlyByTools","title":"`refund_ok`, `refund_failed`, `sent` are fired only by the results of their tools"}],"name":"refund","payloads":{"large_refund":{"additionalProperties":false,"description":"The refund the workflow decided on; ``refund_item`` must match it exactly.","properties":{"amount_paise":{"description":"the refund in paise","exclusiveMinimum":0,"title":"Amount Paise","type":"integer"},"item_id":{"description":"the item to refund","minLength":1,"title":"Item Id","type":"string"}},"required":["item_id","amount_paise"],"title":"RefundDecision","type":"object"},"no_refund":{"additionalProperties":false,"properties":{"reason":{"description":"why no refund is given","minLength":1,"title":"Reason","type":"string"}},"required":["reason"],"title":"NoRefund","type":"object"},"small_refund":{"additionalProperties":false,"description":"The refund the workflow decided on; ``refund_item`` must match it exactly.","properties":{"amount_paise":{"description":"the refund in paise","exclusiveMinimum":0,"title":"Amount Paise","type":"integer"},"item_id":{"description":"the item to refund","minLength":1,"title":"Item Id","type":"string"}},"required":["item_id","amount_paise"],"title":"RefundDecision","type":"object"}},"records":{"large_refund":"decision","no_refund":"no_refund","small_refund":"decision"},"settings":{"approval_limit_paise":50000},"states":["collecting","verifying","deciding","awaiting_approval","refunding","replying","done","handed_over"],"system_prompt":"You are a refund clerk for an online shop. Work one step at a time with the tools you are given; fire workflow events with the advance tool. Amounts are integer paise (₹1 = 100 paise).","terminal":["done","handed_over"],"tools":{"get_order":{"approval":false,"check":false,"description":"Fetch an order of the customer.","emits":[],"name":"get_order","parameters":{"additionalProperties":false,"properties":{"order_id":{"description":"the order id, e.g. A-1001","pattern":"^[A-Z]-\\d{4}$","title":"Order Id","type":"string"}},"required":["order_id"],"type":"object"},"remember":true,"retry_safe":false,"tags":[],"write":false},"get_policy":{"approval":false,"check":false,"description":"Refund policy for an order: eligibility, window, refundable amount in paise.","emits":[],"name":"get_policy","parameters":{"additionalProperties":false,"properties":{"order_id":{"description":"the order id, e.g. A-1001","pattern":"^[A-Z]-\\d{4}$","title":"Order Id","type":"string"}},"required":["order_id"],"type":"object"},"remember":true,"retry_safe":false,"tags":[],"write":false},"refund_item":{"approval":false,"check":true,"description":"Refund one item through the payment gateway.","emits":["refund_failed","refund_ok"],"name":"refund_item","parameters":{"additionalProperties":false,"properties":{"amount_paise":{"description":"the amount in paise","exclusiveMinimum":0,"title":"Amount Paise","type":"integer"},"item_id":{"description":"the item to refund","minLength":1,"title":"Item Id","type":"string"},"order_id":{"description":"the order id","pattern":"^[A-Z]-\\d{4}$","title":"Order Id","type":"string"}},"required":["order_id","item_id","amount_paise"],"type":"object"},"remember":false,"retry_safe":true,"tags":["moves_money"],"write":true},"send_reply":{"approval":false,"check":false,"description":"Send the customer a reply.","emits":["sent"],"name":"send_reply","parameters":{"additionalProperties":false,"properties":{"text":{"description":"the reply to the customer","maxLength":2000,"minLength":1,"title":"Text","type":"string"}},"required":["text"],"type":"object"},"remember":false,"retry_safe":true,"tags":[],"write":true}},"tools_by_state":{"collecting":["get_order"],"refunding":["refund_item"],"replying":["send_reply"],"verifying":["get_order","get_policy"]},"transitions":{"awaiting_approval":{"approved":"refunding","declined":"replying","expired":"handed_over"},"collecting":{"details_complete":"verifying"},"deciding":{"large_refund":"awaiting_approval","no_refund":"replying","small_refund":"refunding"},"refunding":{"refund_failed":"handed_over","refund_ok":"replying"},"replying":{"sent":"done"},"verifying":{"cannot_verify":"handed_over","verified":"deciding"}},"version":"1"}',1700000000.5);
INSERT INTO "definitions" VALUES('c7b38ab6f988f801','chat_desk','','{"amend":null,"approval_ttl_seconds":259200.0,"approve_event":"approved","asks_customer":["talking"],"customer_events":["confirmed","declined","silent"],"deny_event":"declined","expiry_event":null,"finish_states":[],"guards":{},"handed_over_states":["closed","handed_over"],"human_events":[],"initial":"talking","instructions":{"cancelling":"Call cancel_order with exactly the confirmed proposal.","talking":"Find out which order the customer wants cancelled, fetch it, then propose cancel_order with its exact arguments."},"interpret":"chat_desk.explicit_yes","invariants":[{"kind":"ConfirmedWrites","title":"`cancel_order` runs only after the customer''s yes to exactly that call, one call per yes","tools":["cancel_order"]},{"events":["confirmed","declined","silent"],"kind":"CustomerOnly","title":"`confirmed`, `declined`, `silent` are fired only by the customer''s reply"},{"kind":"ToolOnlyIn","states":["cancelling"],"title":"`cancel_order` runs only in `cancelling`","tool":"cancel_order"},{"event":"cancel_failed","kind":"NothingAfter","title":"nothing happens after `cancel_failed` fires","tool":null},{"kind":"AlwaysReaches","states":["done","closed","handed_over"],"title":"every state can reach `done` or `closed` or `handed_over`"}],"name":"chat_desk","payloads":{"propose":{"additionalProperties":false,"description":"A write proposed to the customer: the tool and its exact arguments.","properties":{"args":{"additionalProperties":true,"title":"Args","type":"object"},"tool":{"title":"Tool","type":"string"}},"required":["tool","args"],"title":"Proposal","type":"object"}},"records":{"propose":"proposal"},"reply_expiry_event":"silent","reply_ttl_seconds":3600.0,"settings":{},"states":["talking","confirming","cancelling","done","closed","handed_over"],"system_prompt":"","terminal":["closed","done","handed_over"],"tools":{"cancel_order":{"always_emits":true,"approval":false,"check":false,"confirmed_by":"proposal","description":"Cancel a pending order.","emits":["cancel_failed","cancelled"],"name":"cancel_order","parameters":{"additionalProperties":false,"properties":{"order_id":{"pattern":"^[A-Z]-\\d{4}$","title":"Order Id","type":"string"},"reason":{"description":"why","pattern":"^(no longer needed|ordered by mistake)$","title":"Reason","type":"string"}},"required":["order_id","reason"],"type":"object"},"remember":false,"retry_safe":true,"tags":[],"write":true},"get_order":{"approval":false,"check":false,"description":"Fetch an order.","emits":[],"name":"get_order","parameters":{"additionalProperties":false,"properties":{"order_id":{"description":"the order id, e.g. A-1001","pattern":"^[A-Z]-\\d{4}$","title":"Order Id","type":"string"}},"required":["order_id"],"type":"object"},"remember":true,"retry_safe":false,"tags":[],"write":false}},"tools_by_state":{"cancelling":["cancel_order"],"talking":["get_order"]},"transitions":{"cancelling":{"cancel_failed":"handed_over","cancelled":"talking"},"confirming":{"confirmed":"cancelling","declined":"talking","silent":"closed"},"talking":{"give_up":"handed_over","nothing_to_do":"done","propose":"confirming","silent":"closed"}},"version":""}',1700000058.5);
CREATE TABLE effects (
        key TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        tool TEXT NOT NULL,
        args TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('STARTED', 'DONE')),
        result TEXT,
        error TEXT,
        started_at REAL NOT NULL,
        finished_at REAL
    , claim TEXT);
INSERT INTO "effects" VALUES('declined:7','declined',7,'send_reply','{"text":"Your refund is on its way."}','DONE','{"message":"declined:7","status":"sent"}',NULL,1700000036.0,1700000038.0,'4aedc97ca45e3c2b52707f2028bf63c0e8d814136b441da481bb16bf2ff993ce');
INSERT INTO "effects" VALUES('messy:9','messy',9,'refund_item','{"amount_paise":35000,"item_id":"kettle-1","order_id":"A-1001"}','DONE','{"amount_paise":35000,"payment":"messy:9","status":"ok"}',NULL,1700000053.5,1700000055.0,'bc6af7c49ad423098b5dfa737df0db10fc2b7694e20a515e88618f7f25ca9725');
INSERT INTO "effects" VALUES('messy:10','messy',10,'send_reply','{"text":"Your refund of ₹350 for the electric kettle is on its way."}','DONE','{"message":"messy:10","status":"sent"}',NULL,1700000056.0,1700000058.0,'33a221a53761f88de939fcbbef4b3186d926cfffe50fc86c7b2551f2e292031d');
INSERT INTO "effects" VALUES('chat:4','chat',4,'cancel_order','{"order_id":"A-1001","reason":"no longer needed"}','DONE','{"cancelled":true,"key":"chat:4","order_id":"A-1001","reason":"no longer needed"}',NULL,1700000073.0,1700000074.5,'8b4ee83267e07b9b39408d5b63fe0525b1566410f6146ee33db6288016de3fc6');
CREATE TABLE events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        step INTEGER NOT NULL,
        time REAL NOT NULL,
        kind TEXT NOT NULL,
        state_before TEXT,
        state_after TEXT,
        tool TEXT,
        event TEXT,
        reason TEXT,
        cost_micros INTEGER NOT NULL DEFAULT 0,
        tokens INTEGER NOT NULL DEFAULT 0,
        reviewer TEXT,
        detail TEXT NOT NULL DEFAULT '{}',
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
INSERT INTO "events" VALUES('chat',0,0,1700000059.0,'start','talking','talking',NULL,NULL,NULL,0,0,NULL,'{"rows":{"messages":[0,1,"fef657c2e0e591d4536cb86fbfddaf99d33ac4692e1949b7ffc5e5f7b779068b"],"snapshot":"825020aaf6a53cbe6b85ef288d7f00d6e8624acf5e143a76b4b6065a0b1856d7"},"user":"asha"}','0000000000000000000000000000000000000000000000000000000000000000','4f2f04449426904c6d2cd40f7609c1870bb46e31031064b9160306f3178a2570');
INSERT INTO "events" VALUES('chat',1,1,1700000061.0,'policy','talking','talking',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','4f2f04449426904c6d2cd40f7609c1870bb46e31031064b9160306f3178a2570','e39f1376340447cfec9eeb23976af2fbb1193de9646cfee532c68e33c50b5a27');
INSERT INTO "events" VALUES('chat',2,1,1700000062.0,'ask','talking','talking',NULL,NULL,NULL,0,0,NULL,'{"args":{},"asked":"612557cef0a2ee88df1f6d148522427ea80078c7d63fa1232f0aafcb6c32e013","events":["silent"],"expires_at":1700003661.5,"message":"Which order would you like to cancel?","record":null,"rows":{"messages":[1,2,"827ff1553903a732d90009a9d3e2826e1bb3c30bbee6e6deaab78d7ec9e94930"],"snapshot":"cfea2ce845fc00182c68dc37836d8d03833a5c1daff5585f7afed4a5e1d140fa","view":[1,"98ac4fb72a368bece5dfbcbdc972b1c024e91df3b38107d68719a8b744cf13c4"]}}','e39f1376340447cfec9eeb23976af2fbb1193de9646cfee532c68e33c50b5a27','763b6c061497971a41f9051fb7335c3ec17847e46fc504be35cdfa42d764fee8');
INSERT INTO "events" VALUES('chat',3,1,1700000064.5,'reply','talking','talking',NULL,NULL,NULL,0,0,NULL,'{"asked":"612557cef0a2ee88df1f6d148522427ea80078c7d63fa1232f0aafcb6c32e013","bound":true,"chars":13,"received_at":1700000063.0,"rows":{"messages":[2,3,"54948c37d2fdc2d8766250f780165059a3c1741a205be60e1d5fcdd63ce8c92a"],"snapshot":"e2ba1513155864b56a633043e24b8d16632297f338a40acf9e29123a9f8cbbb4"},"seq":1,"sha256":"8861d892592518332e46506c403b62ded205e2289dcd809c52fa1fd25c67eb7b"}','763b6c061497971a41f9051fb7335c3ec17847e46fc504be35cdfa42d764fee8','6a733d5a8f3dc1409ec29f6a12fc102ed73e3bd89d1cf63b337e15391a03355f');
INSERT INTO "events" VALUES('chat',4,2,1700000065.5,'policy','talking','talking',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','6a733d5a8f3dc1409ec29f6a12fc102ed73e3bd89d1cf63b337e15391a03355f','decc9cac0c0b37956818bf7f0eb0c587ee4157b716660e9c3002423289dde5fa');
INSERT INTO "events" VALUES('chat',5,2,1700000066.0,'tool','talking','talking','get_order',NULL,NULL,0,0,NULL,'{"args":{"order_id":"A-1001"},"error":null,"key":"chat:2","rows":{"messages":[3,5,"87e2e0198db7be4322a9d43c7eb4fbceac0f66491223d1aab5961d9d77abf28c"],"snapshot":"0cb871fb6a46ad86583b3d4ba31fdc3d3eea781dc44ac4b549370dbb35140040","view":[2,"88f36e04ed24a7a3ad8339e98419e20c41e4cbed55d9cea8807d730957228d37"]}}','decc9cac0c0b37956818bf7f0eb0c587ee4157b716660e9c3002423289dde5fa','4517a2a8757719203a22c4506bdec942134f1299b8db56180ae1fc302439441d');
INSERT INTO "events" VALUES('chat',6,3,1700000067.0,'policy','talking','talking',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','4517a2a8757719203a22c4506bdec942134f1299b8db56180ae1fc302439441d','85427ce2e9a7ddfb2dc9c9babbb0c28bf78ec8340e646e7408a45435a7bc214c');
INSERT INTO "events" VALUES('chat',7,3,1700000067.5,'transition','talking','confirming',NULL,'propose',NULL,0,0,NULL,'{}','85427ce2e9a7ddfb2dc9c9babbb0c28bf78ec8340e646e7408a45435a7bc214c','807fb11bca6a9d24b90cc02c2d31a9e1fe003fbaac1e560097ce3ad9eba7192b');
INSERT INTO "events" VALUES('chat',8,3,1700000068.5,'ask','confirming','confirming',NULL,NULL,NULL,0,0,NULL,'{"args":{"args":{"order_id":"A-1001","reason":"no longer needed"},"tool":"cancel_order"},"asked":"87dd5ddceaf51f936d6f2ee867b8b2fb96a5d93be314104749b40d99934030ce","events":["confirmed","declined","silent"],"expires_at":1700003668.0,"message":"I will cancel with {''order_id'': ''A-1001'', ''reason'': ''no longer needed''}. Go ahead? (yes/no)","record":"proposal","rows":{"messages":[5,7,"d25aec53dd5a3660ee206c51edd904f56207b5d095fbffba4b7c1589fbf227a4"],"snapshot":"192b4d6d460e0ca6bb8aa92e97374c2a8c11543868cc73c93cdb1c85a2975701","view":[3,"937abd99020b1028f78f2986e10a74c6b0cbf418a753e70d58cb69114508c96a"]}}','807fb11bca6a9d24b90cc02c2d31a9e1fe003fbaac1e560097ce3ad9eba7192b','d727b206e679312c8cabb5e2159b8b17aa7d0058a797d5a1a91d0e4ac51a259b');
INSERT INTO "events" VALUES('chat',9,3,1700000071.0,'reply','confirming','confirming',NULL,'confirmed',NULL,0,0,NULL,'{"asked":"87dd5ddceaf51f936d6f2ee867b8b2fb96a5d93be314104749b40d99934030ce","bound":true,"chars":3,"confirms":{"args":{"order_id":"A-1001","reason":"no longer needed"},"hash":"5b9f95d6cb894a0db9b18f1761a1aecdc6ab76b29240941c744b7e2d1b00ccca","tool":"cancel_order"},"event":"confirmed","received_at":1700000069.5,"seq":2,"sha256":"8a798890fe93817163b10b5f7bd2ca4d25d84c52739a645a889c173eee7d9d3d"}','d727b206e679312c8cabb5e2159b8b17aa7d0058a797d5a1a91d0e4ac51a259b','835298dc9f7e39b3537f5498523d84057effe2d8dc21fb2109556df37de2e407');
INSERT INTO "events" VALUES('chat',10,3,1700000071.5,'transition','confirming','cancelling',NULL,'confirmed',NULL,0,0,NULL,'{"rows":{"messages":[7,8,"27ce47c98335f42a66925e5dd0f27339d314c5647b4153f6650df664a6e1be6c"],"snapshot":"99c19c5137ad77b3fe582a668798fe592a36c34f4d0f6174b5231099dadb0e01"}}','835298dc9f7e39b3537f5498523d84057effe2d8dc21fb2109556df37de2e407','7678eb76c2ef4d95650878cf4807b270e945349671975a16f0c0284ea1e23434');
INSERT INTO "events" VALUES('chat',11,4,1700000073.0,'claim','cancelling','cancelling','cancel_order',NULL,NULL,0,0,NULL,'{"args_hash":"6297cf24ad8c83a2ea72a5c4a4a419cce38c80d525a65c3fe46accc61df34241","bound":{"confirmation":{"hash":"5b9f95d6cb894a0db9b18f1761a1aecdc6ab76b29240941c744b7e2d1b00ccca","reply":2}},"key":"chat:4"}','7678eb76c2ef4d95650878cf4807b270e945349671975a16f0c0284ea1e23434','8b4ee83267e07b9b39408d5b63fe0525b1566410f6146ee33db6288016de3fc6');
INSERT INTO "events" VALUES('chat',12,4,1700000072.5,'policy','cancelling','cancelling',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','8b4ee83267e07b9b39408d5b63fe0525b1566410f6146ee33db6288016de3fc6','487ae7d0635913deba6418d983cc548a13be8ebb91571cd9d8e98dfa02c68dfa');
INSERT INTO "events" VALUES('chat',13,4,1700000073.5,'tool','cancelling','cancelling','cancel_order',NULL,NULL,0,0,NULL,'{"args":{"order_id":"A-1001","reason":"no longer needed"},"confirmed":{"hash":"5b9f95d6cb894a0db9b18f1761a1aecdc6ab76b29240941c744b7e2d1b00ccca","reply":2},"error":null,"key":"chat:4"}','487ae7d0635913deba6418d983cc548a13be8ebb91571cd9d8e98dfa02c68dfa','d9616021bccc98fa3bcf2e74d1a01af0fe73f1971d26f3e25e8e4246a1c7e622');
INSERT INTO "events" VALUES('chat',14,4,1700000074.0,'transition','cancelling','talking',NULL,'cancelled',NULL,0,0,NULL,'{"rows":{"effects":{"chat:4":"1115f463e3af83e06d0c0bf7ee1c7461cb90ce7cf3d81c2ccb6ca782e95a9666"},"messages":[8,10,"0905e8453dbb4dbb9a27d12341370335b63153556fdbe562f996388374a2c9a1"],"snapshot":"0e8764deb0436ebf04f7c4a57f13382ecf7b6a2cc733abe586a21a79d75323a2","view":[4,"892a01046a896ebf7cd74877b400abe91242082ef731a54c0adb5e58e29907d4"]}}','d9616021bccc98fa3bcf2e74d1a01af0fe73f1971d26f3e25e8e4246a1c7e622','d2642946a9f046c94d47938d1ab5db3f9e5e702e94c19b89d42b8399c98e015a');
INSERT INTO "events" VALUES('chat',15,5,1700000075.0,'policy','talking','talking',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','d2642946a9f046c94d47938d1ab5db3f9e5e702e94c19b89d42b8399c98e015a','fc5b1d9799a1628d8eb89feb4bb995fbbd9955dacf1763785eb6e9b9d869aa72');
INSERT INTO "events" VALUES('chat',16,5,1700000075.5,'transition','talking','done',NULL,'nothing_to_do',NULL,0,0,NULL,'{}','fc5b1d9799a1628d8eb89feb4bb995fbbd9955dacf1763785eb6e9b9d869aa72','94f0b229a3df625417d5be2a01678defec4a74242806abaade348d4adedba791');
INSERT INTO "events" VALUES('chat',17,5,1700000076.0,'stop','done','done',NULL,NULL,NULL,0,0,NULL,'{"rows":{"messages":[10,12,"8e20aaf08d9291edf8178ecba5767362218328063453505fca651a5cffb18080"],"snapshot":"f33e1b1cf2883e38fd8cd4768637541f97182fd8c44a97873507fae5913bc75f","view":[5,"488ec5adbadbad9e5b84bae8fe19bee8cfea5d3d5b59ac1697c7b1edf720ad8f"]},"status":"done"}','94f0b229a3df625417d5be2a01678defec4a74242806abaade348d4adedba791','0c1154d13f00679ac1bdf53c2d6c3fc7f43ebef2d2991342f252c36d530b7f6f');
INSERT INTO "events" VALUES('declined',0,0,1700000020.0,'start','collecting','collecting',NULL,NULL,NULL,0,0,NULL,'{"rows":{"messages":[0,1,"594c4b19b6845cf727677293daaeb3bd7232fe9b70555109f44ea7a2328dbd09"],"snapshot":"7a55e0d65784b7b30f0459757f46358c7b627fb5243ae872f6b5ddf8bbb4011a"},"user":"ravi"}','0000000000000000000000000000000000000000000000000000000000000000','50eecfb66413e4ca526bd7ba5d5cc4c836fb45a76e91d9214693a93467c9debd');
INSERT INTO "events" VALUES('declined',1,1,1700000022.0,'policy','collecting','collecting',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','50eecfb66413e4ca526bd7ba5d5cc4c836fb45a76e91d9214693a93467c9debd','c691b567bd35383bcea0ad7dd7490b21c1a06126733fef2b4e74e070f6e56484');
INSERT INTO "events" VALUES('declined',2,1,1700000022.5,'tool','collecting','collecting','get_order',NULL,NULL,0,0,NULL,'{"args":{"order_id":"A-1002"},"error":null,"key":"declined:1","rows":{"messages":[1,3,"8bbb98dc2d65d3b4cd03ccdaf61c0e29be90fe1e410dc6b1d6e4b6e152ee4207"],"snapshot":"4f61d7fc09a1dd65b9bbc4d3676545f6803b392804913937cd4680bb0b68149b","view":[1,"dc5b4492ce89ad4cd9fa5d77c672a40a6925ab8b7bbe15574416bfd16e44c86b"]}}','c691b567bd35383bcea0ad7dd7490b21c1a06126733fef2b4e74e070f6e56484','2923202fed201c75528170461279d0e5411e089d3eab0c0e649dc841fd78873d');
INSERT INTO "events" VALUES('declined',3,2,1700000023.5,'policy','collecting','collecting',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','2923202fed201c75528170461279d0e5411e089d3eab0c0e649dc841fd78873d','ce906965adf09b7f12604e22379d10ee4223c67c1eb1a1e8f81dd087a011d3d9');
INSERT INTO "events" VALUES('declined',4,2,1700000024.0,'transition','collecting','verifying',NULL,'details_complete',NULL,0,0,NULL,'{"rows":{"messages":[3,5,"d2105f507bf743535553f8e477078e5e02522f4a895387bd0ed7d1e7c8abcd61"],"snapshot":"e02f2b897f96f2d2af9cc65ffb50d5df8240c4bca0ae85ed547939ab2a5712a0","view":[2,"c240f9a4e306cfa162b1544a3525d3cc4f05c211b9ef30dd7e1d14e82e2a75b4"]}}','ce906965adf09b7f12604e22379d10ee4223c67c1eb1a1e8f81dd087a011d3d9','db86028f25d837ef8705f3e03f1b703f003f4ea3dd132c7cd40d596b41d70047');
INSERT INTO "events" VALUES('declined',5,3,1700000025.0,'policy','verifying','verifying',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','db86028f25d837ef8705f3e03f1b703f003f4ea3dd132c7cd40d596b41d70047','510cd718c765b5c0eb7924567f49f4a4d365f83a66ee75b8cc316465821f6cb6');
INSERT INTO "events" VALUES('declined',6,3,1700000025.5,'tool','verifying','verifying','get_policy',NULL,NULL,0,0,NULL,'{"args":{"order_id":"A-1002"},"error":null,"key":"declined:3","rows":{"messages":[5,7,"fd5f8ac67fda38939423d31a3501123ebcd312ec5f5db4528778d200570d5e04"],"snapshot":"515ce8d464f14b22b1da00b6cb70f479cbece6334d958576f8433797c8570d08","view":[3,"531550b11730a963ebb68d934f062f04f993e9b1f685021b1f370f020864b8b1"]}}','510cd718c765b5c0eb7924567f49f4a4d365f83a66ee75b8cc316465821f6cb6','5d2fc74d6598f9448743072d8f64536166a107e6acd2169a61ca1e4f948f07d7');
INSERT INTO "events" VALUES('declined',7,4,1700000026.5,'policy','verifying','verifying',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','5d2fc74d6598f9448743072d8f64536166a107e6acd2169a61ca1e4f948f07d7','59381a19dfcac2d8376c7f52ffc3f73d69bd8bdb884a1e2e79326a5273a7c2fe');
INSERT INTO "events" VALUES('declined',8,4,1700000027.0,'transition','verifying','deciding',NULL,'verified',NULL,0,0,NULL,'{"rows":{"messages":[7,9,"c78c8a7c514fb1589c4fd89af611e841d2bccda9322cd417158e1a56230738df"],"snapshot":"2b772e5cc7efd3af2b2256be34552f8f21b6e774f640ab99b47245d5b4ab37ab","view":[4,"4c13c51ff63cfc7395a1f90ccd54f1bebdfd481dc2b6569e323eba33edb95e21"]}}','59381a19dfcac2d8376c7f52ffc3f73d69bd8bdb884a1e2e79326a5273a7c2fe','5ecc6796b5cf55b05d4d3c1c00c59ff24a3ad96328ae14854d9d42bd8cb5ca50');
INSERT INTO "events" VALUES('declined',9,5,1700000028.0,'policy','deciding','deciding',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','5ecc6796b5cf55b05d4d3c1c00c59ff24a3ad96328ae14854d9d42bd8cb5ca50','0a7ee48ac4f13a63b822c47e21e5774f6e5e1ea43dbceb938b0d71256befebe7');
INSERT INTO "events" VALUES('declined',10,5,1700000028.5,'transition','deciding','awaiting_approval',NULL,'large_refund',NULL,0,0,NULL,'{}','0a7ee48ac4f13a63b822c47e21e5774f6e5e1ea43dbceb938b0d71256befebe7','edc68b6f4b0f3097733cb603b168aaff8cebe3899f66132109b12e08f8950922');
INSERT INTO "events" VALUES('declined',11,5,1700000029.5,'pause','awaiting_approval','awaiting_approval',NULL,NULL,NULL,0,0,NULL,'{"approval_id":"68bc6942b8a8","args":{"amount_paise":180000,"item_id":"headphones-1"},"events":["approved","declined","expired"],"expires_at":1700259229.0,"rows":{"approval":["68bc6942b8a8","09447390a671fd8fc1d310d90afba16e9b2668daad6b3f452aa1261d1b128d67"],"messages":[9,11,"ba8f01f9090d0ec33e22b5d6e79dc09dd8c245bd0aba8ea5247fd1ceade47f20"],"notifications":["68bc6942b8a8:waiting"],"snapshot":"bcbb5d0b5a260e82003fa0638405f36d6174d48630adb75b3857e4c91fc84a04","view":[5,"5e5d4e3de00d210375289fc4a22c357067eafcbb42c5141522177a111a446252"]}}','edc68b6f4b0f3097733cb603b168aaff8cebe3899f66132109b12e08f8950922','f884f1ca10f50f88107132ee79e3cc01c2f617244202ee48dc4dd9ff4cc2cbaf');
INSERT INTO "events" VALUES('declined',12,5,1700000032.5,'decision','awaiting_approval','awaiting_approval',NULL,NULL,NULL,0,0,'supervisor','{"approval_id":"68bc6942b8a8","decision":"denied","note":"no"}','f884f1ca10f50f88107132ee79e3cc01c2f617244202ee48dc4dd9ff4cc2cbaf','c5aba7f3e7045114b52cb9f5885543a6dc0d516ea11c5419492a1fb9898bd8a0');
INSERT INTO "events" VALUES('declined',13,5,1700000033.0,'transition','awaiting_approval','replying',NULL,'declined',NULL,0,0,NULL,'{"rows":{"decision":["68bc6942b8a8","1b615b689139ab93e8b428a3830dafd8ac1bf1c50e20fb27a55b181894c2dbd1"],"messages":[11,12,"293956f3584ee27f56714dc9c9e55122c72ff0175e9a5fe72db4fc68e1fe1405"],"snapshot":"ae719bd46b84670cc02adbb85e09670bf8688efc240a3ba766609566cb131fc4"}}','c5aba7f3e7045114b52cb9f5885543a6dc0d516ea11c5419492a1fb9898bd8a0','cc37ebfcb5c6296c7b165853f835929445368fae68485febafb4bac674902018');
INSERT INTO "events" VALUES('declined',14,6,1700000034.0,'policy','replying','replying',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','cc37ebfcb5c6296c7b165853f835929445368fae68485febafb4bac674902018','0adf81677403b374ab3dad77f9195d2744d11860843ddcbb9f9c5b483a048663');
INSERT INTO "events" VALUES('declined',15,6,1700000034.5,'refusal','replying','replying','refund_item',NULL,'tool ''refund_item'' is not allowed in state ''replying'' (allowed: send_reply)',0,0,NULL,'{"rows":{"messages":[12,14,"405f493a8af7adda8dd95777c63aa1ef154c18ed5bcf37048da3838731c437a8"],"snapshot":"347bb27448763d403e39a26078f4261403d1923ed1756200baf199edf4fddabc","view":[6,"9127accad81bd173d9c95bc8b35512f064925bc407ada22dd1cb46661a490119"]}}','0adf81677403b374ab3dad77f9195d2744d11860843ddcbb9f9c5b483a048663','974324c9c51dc8a74f7493d763376c025aec3ddcb0c8cfe43eb630ceca858601');
INSERT INTO "events" VALUES('declined',16,7,1700000036.0,'claim','replying','replying','send_reply',NULL,NULL,0,0,NULL,'{"args_hash":"08ae5afb3de65c4d67ebe56edd31264d683b1f4a75cb5443c0f2c8e2380db7f9","bound":null,"key":"declined:7"}','974324c9c51dc8a74f7493d763376c025aec3ddcb0c8cfe43eb630ceca858601','4aedc97ca45e3c2b52707f2028bf63c0e8d814136b441da481bb16bf2ff993ce');
INSERT INTO "events" VALUES('declined',17,7,1700000035.5,'policy','replying','replying',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','4aedc97ca45e3c2b52707f2028bf63c0e8d814136b441da481bb16bf2ff993ce','37145d6a49d3f195dba04c5621bfa8a356edec6504f192d3d979ab30238dab78');
INSERT INTO "events" VALUES('declined',18,7,1700000036.5,'tool','replying','replying','send_reply',NULL,NULL,0,0,NULL,'{"args":{"text":"Your refund is on its way."},"error":null,"key":"declined:7"}','37145d6a49d3f195dba04c5621bfa8a356edec6504f192d3d979ab30238dab78','dd49838513fca5f041359f92f6442c03e8baa61e54b7449e3934882ef0bede0f');
INSERT INTO "events" VALUES('declined',19,7,1700000037.0,'transition','replying','done',NULL,'sent',NULL,0,0,NULL,'{}','dd49838513fca5f041359f92f6442c03e8baa61e54b7449e3934882ef0bede0f','f5e649194beddb0f74cd2470d8c81db6556d47e668e7964dcccda01955535cf8');
INSERT INTO "events" VALUES('declined',20,7,1700000037.5,'stop','done','done',NULL,NULL,NULL,0,0,NULL,'{"rows":{"effects":{"declined:7":"6c078e294bad07321e07b5cca0afc7a72fa0cfcdbc2bbba7402bcd9761576f4e"},"messages":[14,16,"8786e4c0a83ced6d065ef949fe732e77d0ead6ff864ddeca73be6440eeec40a2"],"snapshot":"4d5b6fb272da2db525723dbf9ee524e87d03831d134c12cacc45762448c4db4f","view":[7,"b46d7c14056a97b781375471858f5ff5ef57f9a285e9032e7a41e05d63581611"]},"status":"done"}','f5e649194beddb0f74cd2470d8c81db6556d47e668e7964dcccda01955535cf8','f9e847d18e40c199702c4448b0eb4a45a1104beb4163a6ddad5cb084695a6868');
INSERT INTO "events" VALUES('lowered',0,0,1700000001.0,'start','collecting','collecting',NULL,NULL,NULL,0,0,NULL,'{"rows":{"messages":[0,1,"594c4b19b6845cf727677293daaeb3bd7232fe9b70555109f44ea7a2328dbd09"],"snapshot":"959ab11f433736b1a25b1fa833e57d41434cf41ee05d30086716d594628dbee9"},"user":"ravi"}','0000000000000000000000000000000000000000000000000000000000000000','a41336dc99728f5079397aec40ea0fe964cd52d3cc46872d81d26faf4c9a2e04');
INSERT INTO "events" VALUES('lowered',1,1,1700000003.0,'policy','collecting','collecting',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','a41336dc99728f5079397aec40ea0fe964cd52d3cc46872d81d26faf4c9a2e04','490f09321b1d9e5049709b47b2693efd3bee71e0aaff813291adcd43358736a5');
INSERT INTO "events" VALUES('lowered',2,1,1700000003.5,'tool','collecting','collecting','get_order',NULL,NULL,0,0,NULL,'{"args":{"order_id":"A-1002"},"error":null,"key":"lowered:1","rows":{"messages":[1,3,"8bbb98dc2d65d3b4cd03ccdaf61c0e29be90fe1e410dc6b1d6e4b6e152ee4207"],"snapshot":"a5613043264cf768317e09c81241946c85d67e95b8a992b9fc9237a414985e74","view":[1,"dc5b4492ce89ad4cd9fa5d77c672a40a6925ab8b7bbe15574416bfd16e44c86b"]}}','490f09321b1d9e5049709b47b2693efd3bee71e0aaff813291adcd43358736a5','5e7e5d7f2f23b34b8e33a6b62f4ec7c1316d41b76dd5ede367de59046ac67cc9');
INSERT INTO "events" VALUES('lowered',3,2,1700000004.5,'policy','collecting','collecting',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','5e7e5d7f2f23b34b8e33a6b62f4ec7c1316d41b76dd5ede367de59046ac67cc9','4df8bdbd6e19974d78aba863d0799529a97f0b239270061429b8cc7f5f2523a9');
INSERT INTO "events" VALUES('lowered',4,2,1700000005.0,'transition','collecting','verifying',NULL,'details_complete',NULL,0,0,NULL,'{"rows":{"messages":[3,5,"d2105f507bf743535553f8e477078e5e02522f4a895387bd0ed7d1e7c8abcd61"],"snapshot":"09e0442c24f8e7dd474ba741adf74bffd22ef8ce1064a63c158a345e693bd823","view":[2,"c240f9a4e306cfa162b1544a3525d3cc4f05c211b9ef30dd7e1d14e82e2a75b4"]}}','4df8bdbd6e19974d78aba863d0799529a97f0b239270061429b8cc7f5f2523a9','4d0e09922b4171de704dd83ee878dfe1cff28a59f672c1d648132b200a69f5e8');
INSERT INTO "events" VALUES('lowered',5,3,1700000006.0,'policy','verifying','verifying',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','4d0e09922b4171de704dd83ee878dfe1cff28a59f672c1d648132b200a69f5e8','22e3c8baa93eff2daf406bec15612c066642f904239c7574f2284e038a5376cc');
INSERT INTO "events" VALUES('lowered',6,3,1700000006.5,'tool','verifying','verifying','get_policy',NULL,NULL,0,0,NULL,'{"args":{"order_id":"A-1002"},"error":null,"key":"lowered:3","rows":{"messages":[5,7,"fd5f8ac67fda38939423d31a3501123ebcd312ec5f5db4528778d200570d5e04"],"snapshot":"a5ceb1c07137ccd3f6ecca76f1874183c327cacf273ec00d601f0d5753af3e9e","view":[3,"531550b11730a963ebb68d934f062f04f993e9b1f685021b1f370f020864b8b1"]}}','22e3c8baa93eff2daf406bec15612c066642f904239c7574f2284e038a5376cc','5f7558a388595476ced8224d68672a2c1e56bf51f04a705dc2e617f71b8ed2b1');
INSERT INTO "events" VALUES('lowered',7,4,1700000007.5,'policy','verifying','verifying',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','5f7558a388595476ced8224d68672a2c1e56bf51f04a705dc2e617f71b8ed2b1','8299830e2ac96a024f96517a7263b38b7d203f70689523fd40ea451a63a97ad2');
INSERT INTO "events" VALUES('lowered',8,4,1700000008.0,'transition','verifying','deciding',NULL,'verified',NULL,0,0,NULL,'{"rows":{"messages":[7,9,"c78c8a7c514fb1589c4fd89af611e841d2bccda9322cd417158e1a56230738df"],"snapshot":"a80bec1c634dd384ebeef9f2f6e4e50b49fbd1234ab9355128410d51ebbc436c","view":[4,"4c13c51ff63cfc7395a1f90ccd54f1bebdfd481dc2b6569e323eba33edb95e21"]}}','8299830e2ac96a024f96517a7263b38b7d203f70689523fd40ea451a63a97ad2','8888a5a4934755327ed5ef5078cfb215b202088313b02693849605e4bc5ef3a9');
INSERT INTO "events" VALUES('lowered',9,5,1700000009.0,'policy','deciding','deciding',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','8888a5a4934755327ed5ef5078cfb215b202088313b02693849605e4bc5ef3a9','425a18030e1d2b492ccfbefd93978c96e6df75d4a7ede4d314f7fe5378f57071');
INSERT INTO "events" VALUES('lowered',10,5,1700000009.5,'transition','deciding','awaiting_approval',NULL,'large_refund',NULL,0,0,NULL,'{}','425a18030e1d2b492ccfbefd93978c96e6df75d4a7ede4d314f7fe5378f57071','25bb25f1391d109e59ba559ecd861e07ededa51abc615acd6d5bd95949816a8d');
INSERT INTO "events" VALUES('lowered',11,5,1700000010.5,'pause','awaiting_approval','awaiting_approval',NULL,NULL,NULL,0,0,NULL,'{"approval_id":"31038570b156","args":{"amount_paise":180000,"item_id":"headphones-1"},"events":["approved","declined","expired"],"expires_at":1700259210.0,"rows":{"approval":["31038570b156","01c76949e7c4ac90f6c4d9135178260103252d77bf97af945a56a267c25ce245"],"messages":[9,11,"ba8f01f9090d0ec33e22b5d6e79dc09dd8c245bd0aba8ea5247fd1ceade47f20"],"notifications":["31038570b156:waiting"],"snapshot":"dc196406e30987da06939aa0d442013012e0ef2b52911e5a730728fb92eefd84","view":[5,"5e5d4e3de00d210375289fc4a22c357067eafcbb42c5141522177a111a446252"]}}','25bb25f1391d109e59ba559ecd861e07ededa51abc615acd6d5bd95949816a8d','92127d8a355b502ab66682fafdc2a3bf58ea3540e2ce40e291014c2262bae8c5');
INSERT INTO "events" VALUES('lowered',12,5,1700000013.5,'decision','awaiting_approval','awaiting_approval',NULL,NULL,NULL,0,0,'supervisor','{"amended":{"approved":{"amount_paise":120000,"item_id":"headphones-1"},"asked":{"amount_paise":180000,"item_id":"headphones-1"}},"approval_id":"31038570b156","decision":"approved","note":"lower"}','92127d8a355b502ab66682fafdc2a3bf58ea3540e2ce40e291014c2262bae8c5','d69f743dcb4cca89a1407d5ff24283623f6a4984a7c46c135cc88dcae60893c6');
INSERT INTO "events" VALUES('lowered',13,5,1700000014.0,'transition','awaiting_approval','refunding',NULL,'approved',NULL,0,0,NULL,'{"rows":{"decision":["31038570b156","42b235a6b5d8976a4ac7e7066fec67d494927a72b6f1d439b9f2e8f38d1143ce"],"messages":[11,12,"168af2f10497fbe52e1d93318769fd5371d962ffa2ffdb1d91d07a306556756a"],"snapshot":"86ea5dbcc4d0996df5dfd21558c664ad1781a4493abfea78fe9ca12ace82ee6e"}}','d69f743dcb4cca89a1407d5ff24283623f6a4984a7c46c135cc88dcae60893c6','bcc4d6c09424d7bcd487c9d3f96c318e0603101764c32b37be6196a0d7963b90');
INSERT INTO "events" VALUES('lowered',14,6,1700000015.0,'policy','refunding','refunding',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','bcc4d6c09424d7bcd487c9d3f96c318e0603101764c32b37be6196a0d7963b90','59a6a49c93c3ea8c8b219746d8a11e67e0365a575633e48fa16281606da121d6');
INSERT INTO "events" VALUES('lowered',15,6,1700000015.5,'refusal','refunding','refunding','refund_item',NULL,'''refund_item'' refused: arguments must equal the decided refund {''order_id'': ''A-1002'', ''item_id'': ''headphones-1'', ''amount_paise'': 120000}',0,0,NULL,'{"rows":{"messages":[12,14,"7ac683ea2674c8245fef28892103f876a113422c385038aa3de8517b4c9cc682"],"snapshot":"68c982f80b2889a50a31f118c8c7e64d6b6eb402d41e82579ab0727728eb0b9e","view":[6,"87adc1af7cdf2bf707d4e4a7a3f074a5ca5955ef2f322da418c7add5c0741f32"]}}','59a6a49c93c3ea8c8b219746d8a11e67e0365a575633e48fa16281606da121d6','75269c5807e58d2dd3c1ea4319e196d73893509454db824eb8486adaaaf184a0');
INSERT INTO "events" VALUES('lowered',16,7,1700000016.5,'policy','refunding','refunding',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','75269c5807e58d2dd3c1ea4319e196d73893509454db824eb8486adaaaf184a0','ad44aa941db4be4fab348b35c0bc30a5d135449ed3368b2a01cd691aa5c43cf1');
INSERT INTO "events" VALUES('lowered',17,7,1700000017.0,'refusal','refunding','refunding','send_reply',NULL,'tool ''send_reply'' is not allowed in state ''refunding'' (allowed: refund_item)',0,0,NULL,'{"rows":{"messages":[14,16,"dd8bb1299a714e4daa98f2fedff958e6c8d86432f616d30333169edae34e815b"],"snapshot":"a532d6fc068a4b49c55c26744f8c72fdb6986b268f8052f9c8341ac2b0edba2c","view":[7,"9cd1087d4f699a6218f2f081b2be4ebd8c2d196c0fe30b3dad18a0f799b0c6a8"]}}','ad44aa941db4be4fab348b35c0bc30a5d135449ed3368b2a01cd691aa5c43cf1','366648cad21d496d1ebe623bccddeebef85e3832a39fea014ac27c317a127112');
INSERT INTO "events" VALUES('lowered',18,8,1700000018.0,'policy','refunding','refunding',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','366648cad21d496d1ebe623bccddeebef85e3832a39fea014ac27c317a127112','6b47c02b7b8dfbbbda2d70c8783aba710f74c3031b9dfe72cec918a95c2cb707');
INSERT INTO "events" VALUES('lowered',19,8,1700000018.5,'stop','refunding','refunding',NULL,NULL,'policy raised ScriptExhausted: the script of 7 action(s) ran out: the policy was asked again at step 8 in state ''refunding'' (last message: {''role'': ''tool'', ''tool'': ''send_reply'', ''error'': "tool ''send_reply'' is not allowed in state ''refunding'' (allowed: refund_item)"}); add actions or check why the run did not stop',0,0,NULL,'{"rows":{"snapshot":"81b532325c529b14bd884096c3e00edb4501882a530bf81947d8a6f397c095e3","view":[8,"171dee5965fea1e1fb9f4ab747af8bd3e9c762d8ee3bda786745ba80b22baaa4"]},"status":"failed"}','6b47c02b7b8dfbbbda2d70c8783aba710f74c3031b9dfe72cec918a95c2cb707','654d8acee2728d63fd0f43b9e42a490b8d9a55b7d5a5f68237971b5d8b4a023f');
INSERT INTO "events" VALUES('messy',0,0,1700000039.0,'start','collecting','collecting',NULL,NULL,NULL,0,0,NULL,'{"rows":{"messages":[0,1,"a34773a68e6c728c1befc66276741c7e75bdf1a55143b7dd4a56d6d424f467ff"],"snapshot":"5f929d34841808eda7c1fe94bd520fbac8c50213a7a86f455a329d7c56e864eb"},"user":"asha"}','0000000000000000000000000000000000000000000000000000000000000000','cc4083e18995b767a9fb7ae4a37a97b9fde8889d03ceff1ec08a413a022655db');
INSERT INTO "events" VALUES('messy',1,1,1700000041.0,'policy','collecting','collecting',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','cc4083e18995b767a9fb7ae4a37a97b9fde8889d03ceff1ec08a413a022655db','70c0175a2ff1ee3bd204a892d780eb7dfd258d99fd547341bcbacee9e0ccd9d6');
INSERT INTO "events" VALUES('messy',2,1,1700000041.5,'refusal','collecting','collecting','refund_item',NULL,'tool ''refund_item'' is not allowed in state ''collecting'' (allowed: get_order)',0,0,NULL,'{"rows":{"messages":[1,3,"a83eedf97cfb4ab1e100c9922ce902c2f9de91262ab7ecdfd789ee2d4671bc75"],"snapshot":"c088ad61ba30115ffd0497ca085f84c28b3f2211bbd31cdfecde5f534370a669","view":[1,"dc5b4492ce89ad4cd9fa5d77c672a40a6925ab8b7bbe15574416bfd16e44c86b"]}}','70c0175a2ff1ee3bd204a892d780eb7dfd258d99fd547341bcbacee9e0ccd9d6','c53d4201ae4187ea932392111d7856e5d1b0cde633ae1fa200c907a5386cfde9');
INSERT INTO "events" VALUES('messy',3,2,1700000042.5,'policy','collecting','collecting',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','c53d4201ae4187ea932392111d7856e5d1b0cde633ae1fa200c907a5386cfde9','a127918c43001bd6aeb8d80041257d4003ea3fe3d678bd583ea285fd7807b7ed');
INSERT INTO "events" VALUES('messy',4,2,1700000043.0,'refusal','collecting','collecting',NULL,NULL,'a final answer is not accepted in state ''collecting'': the workflow finishes through its events. Reply with one tool call: get_order, or advance with event details_complete.',0,0,NULL,'{"rows":{"messages":[3,5,"04be65d676834b757d5b4ed923a5f9f25fb4d83792c4ac91500d865afe084f74"],"snapshot":"4422a9cdc0dba6271a5f287207e8a8062fb29090511c0784e5042ce0876c33eb","view":[2,"c240f9a4e306cfa162b1544a3525d3cc4f05c211b9ef30dd7e1d14e82e2a75b4"]}}','a127918c43001bd6aeb8d80041257d4003ea3fe3d678bd583ea285fd7807b7ed','481a58dd5aa6ee0f760ad7b3d9fe40ef79f9007ee3fa4c1a05b0bf18f01ec9dc');
INSERT INTO "events" VALUES('messy',5,3,1700000044.0,'policy','collecting','collecting',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','481a58dd5aa6ee0f760ad7b3d9fe40ef79f9007ee3fa4c1a05b0bf18f01ec9dc','98f731dff0b2244cca988e9e2175cf20fbe2a1cab100c570ac3948a6c36202e4');
INSERT INTO "events" VALUES('messy',6,3,1700000044.5,'refusal','collecting','collecting',NULL,NULL,'unusable policy output: action: Value error, an action is either a tool call or a final answer',0,0,NULL,'{"rows":{"messages":[5,7,"f40345589e8ab5bc14c9a9c0bcea6fc09a59b0eb2e6f5131120fd037f0136bd6"],"snapshot":"f697bcd5f9393998214aae832cc64394037ddcf6ed8801d0cb592124a499207f","view":[3,"63b0d2cf5009816cb01bad3a51911159459d850f6dc33c2c160dbde0fdd037ff"]}}','98f731dff0b2244cca988e9e2175cf20fbe2a1cab100c570ac3948a6c36202e4','278ef2c58644dd8ae22be3d108cce6075fa3ada8d551cae0e7f6dc217c5d0c09');
INSERT INTO "events" VALUES('messy',7,4,1700000045.5,'policy','collecting','collecting',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','278ef2c58644dd8ae22be3d108cce6075fa3ada8d551cae0e7f6dc217c5d0c09','c9daa3eafa25f6413130dfc3d3247736132d69772261d36125d9664ad83a0767');
INSERT INTO "events" VALUES('messy',8,4,1700000046.0,'tool','collecting','collecting','get_order',NULL,NULL,0,0,NULL,'{"args":{"order_id":"A-1001"},"error":null,"key":"messy:4","rows":{"messages":[7,9,"66748e2e80bbe83edaba733e0f66829f56c7b0919fbe19314549da352fed2fb1"],"snapshot":"c5a68c1c48b0ef59b353a621e6c85ba17a6907e51ea4dd12fbbc69a7b296e352","view":[4,"b4855e49c335e7d4f9a29718b663dbeb45aae984f011d890ce95be9836dd0f3f"]}}','c9daa3eafa25f6413130dfc3d3247736132d69772261d36125d9664ad83a0767','40ee68bd10fe7c3cc79237f1a373c74223e25a9486e41d8a2ca3ac10be0743fe');
INSERT INTO "events" VALUES('messy',9,5,1700000047.0,'policy','collecting','collecting',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','40ee68bd10fe7c3cc79237f1a373c74223e25a9486e41d8a2ca3ac10be0743fe','c901b598be0770e804512a8404a5b23710a74b5fbc2622dd6ffdd245cd066f8f');
INSERT INTO "events" VALUES('messy',10,5,1700000047.5,'transition','collecting','verifying',NULL,'details_complete',NULL,0,0,NULL,'{"rows":{"messages":[9,11,"d2105f507bf743535553f8e477078e5e02522f4a895387bd0ed7d1e7c8abcd61"],"snapshot":"f642437be885089db68064f62e4e24c9b9b8aacc00983a35d81c93d9c92332eb","view":[5,"c2da4848a18f11a560d07a7be97a1c32ccd40610e41ddbf3720a20dd27d5d4b6"]}}','c901b598be0770e804512a8404a5b23710a74b5fbc2622dd6ffdd245cd066f8f','9b616772e9b67cc107f7a2d6b542f470a59bdf89787bf4df937c6acd3d3d1414');
INSERT INTO "events" VALUES('messy',11,6,1700000048.5,'policy','verifying','verifying',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','9b616772e9b67cc107f7a2d6b542f470a59bdf89787bf4df937c6acd3d3d1414','87dc69ab129c2a0e785dc7464ba2eb406a316f4a8a9c7409585553ddc25821b6');
INSERT INTO "events" VALUES('messy',12,6,1700000049.0,'tool','verifying','verifying','get_policy',NULL,NULL,0,0,NULL,'{"args":{"order_id":"A-1001"},"error":null,"key":"messy:6","rows":{"messages":[11,13,"76bf9da7cb35b76b35732940199d041bbdeebc15621c1a54d4081f094c81297a"],"snapshot":"39ebc9ef50925ae85711657f3beb609ae3387b167ff8f05b8736a797c17605d5","view":[6,"b5b4b92efb2b98c705affd67e67cf6d1e2491696c43eb8f6e34a2c21b58e3219"]}}','87dc69ab129c2a0e785dc7464ba2eb406a316f4a8a9c7409585553ddc25821b6','e906b482be1491c51d30f949f1c0b03d64480ca857a87ec6e1c722f70f3cbedb');
INSERT INTO "events" VALUES('messy',13,7,1700000050.0,'policy','verifying','verifying',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','e906b482be1491c51d30f949f1c0b03d64480ca857a87ec6e1c722f70f3cbedb','d8b068938d9b53cd32fcff45df77d7f7e127cfadd3b6ad0ff598b7321a4ad0a5');
INSERT INTO "events" VALUES('messy',14,7,1700000050.5,'transition','verifying','deciding',NULL,'verified',NULL,0,0,NULL,'{"rows":{"messages":[13,15,"c78c8a7c514fb1589c4fd89af611e841d2bccda9322cd417158e1a56230738df"],"snapshot":"8fb67e11fe77b35b161f5a5da3cd9d872a5fb19db3d50095a0ec65822268101e","view":[7,"88afefa42f93bfaa7f7ae5844e803d153b8257002f9d32328cc59ee7a7ddfbc2"]}}','d8b068938d9b53cd32fcff45df77d7f7e127cfadd3b6ad0ff598b7321a4ad0a5','5bfb7fc870275c3cf678c886f79fcf480c2f442914d0a7272638518e9fe7e56f');
INSERT INTO "events" VALUES('messy',15,8,1700000051.5,'policy','deciding','deciding',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','5bfb7fc870275c3cf678c886f79fcf480c2f442914d0a7272638518e9fe7e56f','ac9d23ea3a51612ad586f3b485a5eb0262fe06608b73e7b213e05eae420ce86e');
INSERT INTO "events" VALUES('messy',16,8,1700000052.0,'transition','deciding','refunding',NULL,'small_refund',NULL,0,0,NULL,'{"rows":{"messages":[15,17,"87a232b1437db4a3be4f352b4888c53b32d14323c91d31fc30686e319b0012b0"],"snapshot":"6b87c4113eac5945b177548186f4aefa346c9740a846c546b9c5d0a6c8156ce4","view":[8,"2c11e52aaf5085266931e9f4650655dbbce7bd4bb52283b9fa1fce81a9103865"]}}','ac9d23ea3a51612ad586f3b485a5eb0262fe06608b73e7b213e05eae420ce86e','bf72931f0e57b548b17dce7d6053af0cd679e67e0bd32479f847516009e03e74');
INSERT INTO "events" VALUES('messy',17,9,1700000053.5,'claim','refunding','refunding','refund_item',NULL,NULL,0,0,NULL,'{"args_hash":"3ef7915222aff56880455287016ae645f4a1dc616e586f2cbf4cc0ee01597c6e","bound":null,"key":"messy:9"}','bf72931f0e57b548b17dce7d6053af0cd679e67e0bd32479f847516009e03e74','bc6af7c49ad423098b5dfa737df0db10fc2b7694e20a515e88618f7f25ca9725');
INSERT INTO "events" VALUES('messy',18,9,1700000053.0,'policy','refunding','refunding',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','bc6af7c49ad423098b5dfa737df0db10fc2b7694e20a515e88618f7f25ca9725','c19f490c545c96652d30eab8678bc5264bd03def12b3a3ccb269ddd8777ba732');
INSERT INTO "events" VALUES('messy',19,9,1700000054.0,'tool','refunding','refunding','refund_item',NULL,NULL,0,0,NULL,'{"args":{"amount_paise":35000,"item_id":"kettle-1","order_id":"A-1001"},"error":null,"key":"messy:9"}','c19f490c545c96652d30eab8678bc5264bd03def12b3a3ccb269ddd8777ba732','a1fdfb1168efbb03b14d90933d76ef7f941f69a871e474ebf38dd0be1118ea84');
INSERT INTO "events" VALUES('messy',20,9,1700000054.5,'transition','refunding','replying',NULL,'refund_ok',NULL,0,0,NULL,'{"rows":{"effects":{"messy:9":"98f4c233d03648709dc14decf001541156a1c57a2a9b9dc8123c79e15051da2e"},"messages":[17,19,"73ba71f66c880c2ea6c945bc51a7e47bb3419d7eca926a7a8b6e8acb9049f191"],"snapshot":"320a31d6203bdd897a6784bee8728e9984b7ddabf6ce6c70b9cc7e8c75c6b09c","view":[9,"e83b4f9e1fc6e908e2ac85b9b2fe31d4e3542231dfb9caf0fcc0fa4643f1ba7e"]}}','a1fdfb1168efbb03b14d90933d76ef7f941f69a871e474ebf38dd0be1118ea84','0799b9408a59a74ff9fffbd4f67efbd6543d503c5e792d9657a1773afc891353');
INSERT INTO "events" VALUES('messy',21,10,1700000056.0,'claim','replying','replying','send_reply',NULL,NULL,0,0,NULL,'{"args_hash":"379e9aa91a391e84e4ab3b2c91e8d05150b16e41f17777a571634d688dcacaac","bound":null,"key":"messy:10"}','0799b9408a59a74ff9fffbd4f67efbd6543d503c5e792d9657a1773afc891353','33a221a53761f88de939fcbbef4b3186d926cfffe50fc86c7b2551f2e292031d');
INSERT INTO "events" VALUES('messy',22,10,1700000055.5,'policy','replying','replying',NULL,NULL,NULL,0,0,NULL,'{"calls":0,"input_tokens":0,"output_tokens":0}','33a221a53761f88de939fcbbef4b3186d926cfffe50fc86c7b2551f2e292031d','8ed5dd54d7d1b6286f2b67fee7b3674291340101ed8fc35bbe617cb6bc53f25f');
INSERT INTO "events" VALUES('messy',23,10,1700000056.5,'tool','replying','replying','send_reply',NULL,NULL,0,0,NULL,'{"args":{"text":"Your refund of ₹350 for the electric kettle is on its way."},"error":null,"key":"messy:10"}','8ed5dd54d7d1b6286f2b67fee7b3674291340101ed8fc35bbe617cb6bc53f25f','da3a7eb486b32569fd7fb97f95b7def0c425fec5b7ebfa0e9c5681d86cefad69');
INSERT INTO "events" VALUES('messy',24,10,1700000057.0,'transition','replying','done',NULL,'sent',NULL,0,0,NULL,'{}','da3a7eb486b32569fd7fb97f95b7def0c425fec5b7ebfa0e9c5681d86cefad69','97677e31e68a573a17a41e4825a416d44d796114916c8d0f42acac41fe1806e6');
INSERT INTO "events" VALUES('messy',25,10,1700000057.5,'stop','done','done',NULL,NULL,NULL,0,0,NULL,'{"rows":{"effects":{"messy:10":"c0ecc09be7e4377d02080ecd028c81085375fffc4a5e609a93d99d9ed8e00ff9"},"messages":[19,21,"4a14a2c4124d1266869262c25e2dd3c7039396429a741b7b7ee769637051db94"],"snapshot":"208213bcb3ee4b969d67d60caeea9466a02371dd7e88cb1f921d524d94ee7666","view":[10,"4c881741791f553f527a58ae5858c9b0667821fda6930856552f9e70f15b1ae8"]},"status":"done"}','97677e31e68a573a17a41e4825a416d44d796114916c8d0f42acac41fe1806e6','efe65a2a79a575ce3fe001eb50c624ecb4528151bb9b33ebf7d17cee2a6fa89c');
CREATE TABLE handovers (
        handover_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        workflow TEXT NOT NULL,
        customer TEXT NOT NULL DEFAULT '',
        request TEXT NOT NULL DEFAULT '',
        state TEXT NOT NULL,
        handed_at REAL NOT NULL,
        cause TEXT NOT NULL,
        reason TEXT NOT NULL,
        taken_by TEXT,
        taken_at REAL,
        outcome TEXT,
        note TEXT,
        closed_by TEXT,
        closed_at REAL
    );
CREATE TABLE messages (
        run_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (run_id, idx)
    ) WITHOUT ROWID;
INSERT INTO "messages" VALUES('chat',0,'{"content":"I want to cancel an order","role":"user"}');
INSERT INTO "messages" VALUES('chat',1,'{"content":"Which order would you like to cancel?","role":"assistant","to":"customer"}');
INSERT INTO "messages" VALUES('chat',2,'{"content":"A-1001 please","from":"customer","reply":1,"role":"user"}');
INSERT INTO "messages" VALUES('chat',3,'{"args":{"order_id":"A-1001"},"role":"assistant","tool":"get_order"}');
INSERT INTO "messages" VALUES('chat',4,'{"result":{"customer":"asha","item":"kettle","order_id":"A-1001","status":"pending","yours":true},"role":"tool","tool":"get_order"}');
INSERT INTO "messages" VALUES('chat',5,'{"args":{"args":{"order_id":"A-1001","reason":"no longer needed"},"event":"propose","tool":"cancel_order"},"role":"assistant","text":"I will cancel with {''order_id'': ''A-1001'', ''reason'': ''no longer needed''}. Go ahead? (yes/no)","tool":"advance"}');
INSERT INTO "messages" VALUES('chat',6,'{"result":{"event":"propose","state":"confirming"},"role":"tool","tool":"advance"}');
INSERT INTO "messages" VALUES('chat',7,'{"content":"yes","event":"confirmed","from":"customer","reply":2,"role":"user"}');
INSERT INTO "messages" VALUES('chat',8,'{"args":{"order_id":"A-1001","reason":"no longer needed"},"role":"assistant","tool":"cancel_order"}');
INSERT INTO "messages" VALUES('chat',9,'{"result":{"cancelled":true,"key":"chat:4","order_id":"A-1001","reason":"no longer needed"},"role":"tool","tool":"cancel_order"}');
INSERT INTO "messages" VALUES('chat',10,'{"args":{"event":"nothing_to_do"},"role":"assistant","tool":"advance"}');
INSERT INTO "messages" VALUES('chat',11,'{"result":{"event":"nothing_to_do","state":"done"},"role":"tool","tool":"advance"}');
INSERT INTO "messages" VALUES('declined',0,'{"content":"Order A-1002: my headphones stopped working, I want my money back","role":"user"}');
INSERT INTO "messages" VALUES('declined',1,'{"args":{"order_id":"A-1002"},"role":"assistant","tool":"get_order"}');
INSERT INTO "messages" VALUES('declined',2,'{"result":{"customer_matches":true,"item_id":"headphones-1","item_name":"noise-cancelling headphones","order_id":"A-1002","price_paise":180000},"role":"tool","tool":"get_order"}');
INSERT INTO "messages" VALUES('declined',3,'{"args":{"event":"details_complete"},"role":"assistant","tool":"advance"}');
INSERT INTO "messages" VALUES('declined',4,'{"result":{"event":"details_complete","state":"verifying"},"role":"tool","tool":"advance"}');
INSERT INTO "messages" VALUES('declined',5,'{"args":{"order_id":"A-1002"},"role":"assistant","tool":"get_policy"}');
INSERT INTO "messages" VALUES('declined',6,'{"result":{"approval_limit_paise":50000,"days_since_delivery":10,"eligible":true,"order_id":"A-1002","refundable_paise":180000,"window_days":30,"within_window":true},"role":"tool","tool":"get_policy"}');
INSERT INTO "messages" VALUES('declined',7,'{"args":{"event":"verified"},"role":"assistant","tool":"advance"}');
INSERT INTO "messages" VALUES('declined',8,'{"result":{"event":"verified","state":"deciding"},"role":"tool","tool":"advance"}');
INSERT INTO "messages" VALUES('declined',9,'{"args":{"amount_paise":180000,"event":"large_refund","item_id":"headphones-1"},"role":"assistant","tool":"advance"}');
INSERT INTO "messages" VALUES('declined',10,'{"result":{"event":"large_refund","state":"awaiting_approval"},"role":"tool","tool":"advance"}');
INSERT INTO "messages" VALUES('declined',11,'{"content":"denied by supervisor: no","role":"user"}');
INSERT INTO "messages" VALUES('declined',12,'{"args":{"amount_paise":180000,"item_id":"headphones-1","order_id":"A-1002"},"role":"assistant","tool":"refund_item"}');
INSERT INTO "messages" VALUES('declined',13,'{"error":"tool ''refund_item'' is not allowed in state ''replying'' (allowed: send_reply)","role":"tool","tool":"refund_item"}');
INSERT INTO "messages" VALUES('declined',14,'{"args":{"text":"Your refund is on its way."},"role":"assistant","tool":"send_reply"}');
INSERT INTO "messages" VALUES('declined',15,'{"result":{"message":"declined:7","status":"sent"},"role":"tool","tool":"send_reply"}');
INSERT INTO "messages" VALUES('lowered',0,'{"content":"Order A-1002: my headphones stopped working, I want my money back","role":"user"}');
INSERT INTO "messages" VALUES('lowered',1,'{"args":{"order_id":"A-1002"},"role":"assistant","tool":"get_order"}');
INSERT INTO "messages" VALUES('lowered',2,'{"result":{"customer_matches":true,"item_id":"headphones-1","item_name":"noise-cancelling headphones","order_id":"A-1002","price_paise":180000},"role":"tool","tool":"get_order"}');
INSERT INTO "messages" VALUES('lowered',3,'{"args":{"event":"details_complete"},"role":"assistant","tool":"advance"}');
INSERT INTO "messages" VALUES('lowered',4,'{"result":{"event":"details_complete","state":"verifying"},"role":"tool","tool":"advance"}');
INSERT INTO "messages" VALUES('lowered',5,'{"args":{"order_id":"A-1002"},"role":"assistant","tool":"get_policy"}');
INSERT INTO "messages" VALUES('lowered',6,'{"result":{"approval_limit_paise":50000,"days_since_delivery":10,"eligible":true,"order_id":"A-1002","refundable_paise":180000,"window_days":30,"within_window":true},"role":"tool","tool":"get_policy"}');
INSERT INTO "messages" VALUES('lowered',7,'{"args":{"event":"verified"},"role":"assistant","tool":"advance"}');
INSERT INTO "messages" VALUES('lowered',8,'{"result":{"event":"verified","state":"deciding"},"role":"tool","tool":"advance"}');
INSERT INTO "messages" VALUES('lowered',9,'{"args":{"amount_paise":180000,"event":"large_refund","item_id":"headphones-1"},"role":"assistant","tool":"advance"}');
INSERT INTO "messages" VALUES('lowered',10,'{"result":{"event":"large_refund","state":"awaiting_approval"},"role":"tool","tool":"advance"}');
INSERT INTO "messages" VALUES('lowered',11,'{"approved":{"amount_paise":120000,"item_id":"headphones-1"},"content":"approved by supervisor: lower; approved with amount_paise 180000 → 120000","role":"user"}');
INSERT INTO "messages" VALUES('lowered',12,'{"args":{"amount_paise":180000,"item_id":"headphones-1","order_id":"A-1002"},"role":"assistant","tool":"refund_item"}');
INSERT INTO "messages" VALUES('lowered',13,'{"error":"''refund_item'' refused: arguments must equal the decided refund {''order_id'': ''A-1002'', ''item_id'': ''headphones-1'', ''amount_paise'': 120000}","role":"tool","tool":"refund_item"}');
INSERT INTO "messages" VALUES('lowered',14,'{"args":{"text":"Your refund is on its way."},"role":"assistant","tool":"send_reply"}');
INSERT INTO "messages" VALUES('lowered',15,'{"error":"tool ''send_reply'' is not allowed in state ''refunding'' (allowed: refund_item)","role":"tool","tool":"send_reply"}');
INSERT INTO "messages" VALUES('messy',0,'{"content":"Order A-1001: the kettle arrived broken","role":"user"}');
INSERT INTO "messages" VALUES('messy',1,'{"args":{"amount_paise":35000,"item_id":"kettle-1","order_id":"A-1001"},"role":"assistant","tool":"refund_item"}');
INSERT INTO "messages" VALUES('messy',2,'{"error":"tool ''refund_item'' is not allowed in state ''collecting'' (allowed: get_order)","role":"tool","tool":"refund_item"}');
INSERT INTO "messages" VALUES('messy',3,'{"final":"All done!","role":"assistant"}');
INSERT INTO "messages" VALUES('messy',4,'{"content":"a final answer is not accepted in state ''collecting'': the workflow finishes through its events. Reply with one tool call: get_order, or advance with event details_complete.","role":"user","runtime":true}');
INSERT INTO "messages" VALUES('messy',5,'{"content":"","role":"assistant"}');
INSERT INTO "messages" VALUES('messy',6,'{"content":"unusable policy output: action: Value error, an action is either a tool call or a final answer","role":"user","runtime":true}');
INSERT INTO "messages" VALUES('messy',7,'{"args":{"order_id":"A-1001"},"role":"assistant","text":"Looking it up.","tool":"get_order"}');
INSERT INTO "messages" VALUES('messy',8,'{"result":{"customer_matches":true,"item_id":"kettle-1","item_name":"electric kettle","order_id":"A-1001","price_paise":35000},"role":"tool","tool":"get_order"}');
INSERT INTO "messages" VALUES('messy',9,'{"args":{"event":"details_complete"},"role":"assistant","tool":"advance"}');
INSERT INTO "messages" VALUES('messy',10,'{"result":{"event":"details_complete","state":"verifying"},"role":"tool","tool":"advance"}');
INSERT INTO "messages" VALUES('messy',11,'{"args":{"order_id":"A-1001"},"role":"assistant","tool":"get_policy"}');
INSERT INTO "messages" VALUES('messy',12,'{"result":{"approval_limit_paise":50000,"days_since_delivery":5,"eligible":true,"order_id":"A-1001","refundable_paise":35000,"window_days":30,"within_window":true},"role":"tool","tool":"get_policy"}');
INSERT INTO "messages" VALUES('messy',13,'{"args":{"event":"verified"},"role":"assistant","tool":"advance"}');
INSERT INTO "messages" VALUES('messy',14,'{"result":{"event":"verified","state":"deciding"},"role":"tool","tool":"advance"}');
INSERT INTO "messages" VALUES('messy',15,'{"args":{"amount_paise":35000,"event":"small_refund","item_id":"kettle-1"},"role":"assistant","tool":"advance"}');
INSERT INTO "messages" VALUES('messy',16,'{"result":{"event":"small_refund","state":"refunding"},"role":"tool","tool":"advance"}');
INSERT INTO "messages" VALUES('messy',17,'{"args":{"amount_paise":35000,"item_id":"kettle-1","order_id":"A-1001"},"role":"assistant","tool":"refund_item"}');
INSERT INTO "messages" VALUES('messy',18,'{"result":{"amount_paise":35000,"payment":"messy:9","status":"ok"},"role":"tool","tool":"refund_item"}');
INSERT INTO "messages" VALUES('messy',19,'{"args":{"text":"Your refund of ₹350 for the electric kettle is on its way."},"role":"assistant","tool":"send_reply"}');
INSERT INTO "messages" VALUES('messy',20,'{"result":{"message":"messy:10","status":"sent"},"role":"tool","tool":"send_reply"}');
CREATE TABLE notifications (
        key TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        approval_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('waiting', 'expired')),
        created_at REAL NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'delivered', 'failed', 'unsent')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL DEFAULT 0,
        last_error TEXT,
        delivered_at REAL
    );
INSERT INTO "notifications" VALUES('31038570b156:waiting','lowered','31038570b156','waiting',1700000011.0,'pending',0,1700000011.0,NULL,NULL);
INSERT INTO "notifications" VALUES('68bc6942b8a8:waiting','declined','68bc6942b8a8','waiting',1700000030.0,'pending',0,1700000030.0,NULL,NULL);
CREATE TABLE replies (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        received_at REAL NOT NULL,
        run_version INTEGER NOT NULL,
        asked_hash TEXT,
        read_step INTEGER,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
INSERT INTO "replies" VALUES('chat',1,'A-1001 please',1700000063.0,2,'612557cef0a2ee88df1f6d148522427ea80078c7d63fa1232f0aafcb6c32e013',1);
INSERT INTO "replies" VALUES('chat',2,'yes',1700000069.5,5,'87dd5ddceaf51f936d6f2ee867b8b2fb96a5d93be314104749b40d99934030ce',3);
CREATE TABLE reply_tokens (
        run_id TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL,
        issued_at REAL NOT NULL
    );
CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        status TEXT NOT NULL,
        version INTEGER NOT NULL,
        snapshot TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    , lease_owner TEXT, lease_at REAL, log_count INTEGER NOT NULL DEFAULT 0, log_head TEXT NOT NULL
        DEFAULT '0000000000000000000000000000000000000000000000000000000000000000', lease_until REAL, definition_hash TEXT NOT NULL DEFAULT '', refusal_count INTEGER NOT NULL DEFAULT 0, refusal_head TEXT NOT NULL
        DEFAULT '0000000000000000000000000000000000000000000000000000000000000000');
INSERT INTO "runs" VALUES('lowered','refund','failed',10,'{"schema_version":3,"run_id":"lowered","workflow":"refund","definition_hash":"28dc253ca4e5cf27","user":"ravi","status":"failed","state":"refunding","step":8,"used":{"steps":8,"input_tokens":0,"output_tokens":0,"cost_micros":0,"active_seconds":0.005293587004416622},"budgets":{"max_steps":50,"max_cost_micros":null,"max_tokens":null,"max_active_seconds":null},"facts":{"order":{"order_id":"A-1002","customer_matches":true,"item_id":"headphones-1","item_name":"noise-cancelling headphones","price_paise":180000},"policy":{"order_id":"A-1002","eligible":true,"within_window":true,"days_since_delivery":10,"window_days":30,"refundable_paise":180000,"approval_limit_paise":50000},"decision":{"item_id":"headphones-1","amount_paise":120000}},"pending":null,"reason":"policy raised ScriptExhausted: the script of 7 action(s) ran out: the policy was asked again at step 8 in state ''refunding'' (last message: {''role'': ''tool'', ''tool'': ''send_reply'', ''error'': \"tool ''send_reply'' is not allowed in state ''refunding'' (allowed: refund_item)\"}); add actions or check why the run did not stop","answer":null,"message_count":16,"recent_calls":[],"repeat_refusals":0,"compaction":null,"created_at":1700000000.5,"updated_at":1700000019.0,"confirmation":null,"unavailable":0}',1700000000.5,1700000019.0,NULL,1700000011.5,20,'654d8acee2728d63fd0f43b9e42a490b8d9a55b7d5a5f68237971b5d8b4a023f',NULL,'28dc253ca4e5cf27',0,'0000000000000000000000000000000000000000000000000000000000000000');
INSERT INTO "runs" VALUES('declined','refund','done',10,'{"schema_version":3,"run_id":"declined","workflow":"refund","definition_hash":"28dc253ca4e5cf27","user":"ravi","status":"done","state":"done","step":7,"used":{"steps":7,"input_tokens":0,"output_tokens":0,"cost_micros":0,"active_seconds":0.007954022999911103},"budgets":{"max_steps":50,"max_cost_micros":null,"max_tokens":null,"max_active_seconds":null},"facts":{"order":{"order_id":"A-1002","customer_matches":true,"item_id":"headphones-1","item_name":"noise-cancelling headphones","price_paise":180000},"policy":{"order_id":"A-1002","eligible":true,"within_window":true,"days_since_delivery":10,"window_days":30,"refundable_paise":180000,"approval_limit_paise":50000},"decision":{"item_id":"headphones-1","amount_paise":180000}},"pending":null,"reason":null,"answer":null,"message_count":16,"recent_calls":[],"repeat_refusals":0,"compaction":null,"created_at":1700000019.5,"updated_at":1700000038.0,"confirmation":null,"unavailable":0}',1700000019.5,1700000038.0,NULL,1700000030.5,21,'f9e847d18e40c199702c4448b0eb4a45a1104beb4163a6ddad5cb084695a6868',NULL,'28dc253ca4e5cf27',0,'0000000000000000000000000000000000000000000000000000000000000000');
INSERT INTO "runs" VALUES('messy','refund','done',13,'{"schema_version":3,"run_id":"messy","workflow":"refund","definition_hash":"28dc253ca4e5cf27","user":"asha","status":"done","state":"done","step":10,"used":{"steps":10,"input_tokens":0,"output_tokens":0,"cost_micros":0,"active_seconds":0.00592668799799867},"budgets":{"max_steps":50,"max_cost_micros":null,"max_tokens":null,"max_active_seconds":null},"facts":{"order":{"order_id":"A-1001","customer_matches":true,"item_id":"kettle-1","item_name":"electric kettle","price_paise":35000},"policy":{"order_id":"A-1001","eligible":true,"within_window":true,"days_since_delivery":5,"window_days":30,"refundable_paise":35000,"approval_limit_paise":50000},"decision":{"item_id":"kettle-1","amount_paise":35000}},"pending":null,"reason":null,"answer":null,"message_count":21,"recent_calls":[],"repeat_refusals":0,"compaction":null,"created_at":1700000038.5,"updated_at":1700000058.0,"confirmation":null,"unavailable":0}',1700000038.5,1700000058.0,NULL,1700000040.0,26,'efe65a2a79a575ce3fe001eb50c624ecb4528151bb9b33ebf7d17cee2a6fa89c',NULL,'28dc253ca4e5cf27',0,'0000000000000000000000000000000000000000000000000000000000000000');
INSERT INTO "runs" VALUES('chat','chat_desk','done',9,'{"schema_version":3,"run_id":"chat","workflow":"chat_desk","definition_hash":"c7b38ab6f988f801","user":"asha","status":"done","state":"done","step":5,"used":{"steps":5,"input_tokens":0,"output_tokens":0,"cost_micros":0,"active_seconds":0.004020426000352018},"budgets":{"max_steps":50,"max_cost_micros":null,"max_tokens":null,"max_active_seconds":null},"facts":{"order":{"order_id":"A-1001","customer":"asha","status":"pending","item":"kettle","yours":true},"proposal":{"tool":"cancel_order","args":{"order_id":"A-1001","reason":"no longer needed"}}},"pending":null,"reason":null,"answer":null,"message_count":12,"recent_calls":[],"repeat_refusals":0,"compaction":null,"created_at":1700000058.5,"updated_at":1700000076.5,"confirmation":null,"unavailable":0}',1700000058.5,1700000076.5,NULL,1700000070.0,18,'0c1154d13f00679ac1bdf53c2d6c3fc7f43ebef2d2991342f252c36d530b7f6f',NULL,'c7b38ab6f988f801',0,'0000000000000000000000000000000000000000000000000000000000000000');
CREATE TABLE shop_calls (
    n INTEGER PRIMARY KEY AUTOINCREMENT, api TEXT NOT NULL, idempotency_key TEXT, at REAL NOT NULL
);
INSERT INTO "shop_calls" VALUES(1,'reply','declined:7',1.7961727877448632717e+09);
INSERT INTO "shop_calls" VALUES(2,'refund','messy:9',1.79617278776340746882e+09);
INSERT INTO "shop_calls" VALUES(3,'reply','messy:10',1.79617278776722097402e+09);
CREATE TABLE shop_orders (
    order_id TEXT PRIMARY KEY, customer TEXT NOT NULL, item_id TEXT NOT NULL,
    item_name TEXT NOT NULL, price_paise INTEGER NOT NULL, delivered_at REAL NOT NULL
);
INSERT INTO "shop_orders" VALUES('A-1001','asha','kettle-1','electric kettle',35000,1.79574078759418630604e+09);
INSERT INTO "shop_orders" VALUES('A-1002','ravi','headphones-1','noise-cancelling headphones',180000,1.79530878759418630595e+09);
INSERT INTO "shop_orders" VALUES('A-1003','meera','shoes-1','running shoes',90000,1.79098878759418630602e+09);
INSERT INTO "shop_orders" VALUES('A-1004','asha','lamp-1','desk lamp',42000,1.79591358759418630603e+09);
INSERT INTO "shop_orders" VALUES('A-1005','dev','toaster-1','toaster',42000,1.79599998759418630596e+09);
CREATE TABLE shop_outbox (
    idempotency_key TEXT PRIMARY KEY, customer TEXT NOT NULL, text TEXT NOT NULL, at REAL NOT NULL
);
INSERT INTO "shop_outbox" VALUES('declined:7','ravi','Your refund is on its way.',1.79617278774490070347e+09);
INSERT INTO "shop_outbox" VALUES('messy:10','asha','Your refund of ₹350 for the electric kettle is on its way.',1.79617278776723933216e+09);
CREATE TABLE shop_payments (
    idempotency_key TEXT PRIMARY KEY, order_id TEXT NOT NULL, item_id TEXT NOT NULL,
    amount_paise INTEGER NOT NULL, at REAL NOT NULL
);
INSERT INTO "shop_payments" VALUES('messy:9','A-1001','kettle-1',35000,1.79617278776348114014e+09);
CREATE TABLE subjects (
        workflow TEXT NOT NULL,
        subject TEXT NOT NULL,
        run_id TEXT NOT NULL,
        at REAL NOT NULL,
        PRIMARY KEY (workflow, subject, run_id)
    ) WITHOUT ROWID;
INSERT INTO "subjects" VALUES('refund','order A-1001','messy',1700000055.0);
INSERT INTO "subjects" VALUES('refund','order A-1002','declined',1700000030.0);
INSERT INTO "subjects" VALUES('refund','order A-1002','lowered',1700000011.0);
CREATE TABLE tombstones (
        run_id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        definition_hash TEXT NOT NULL,
        status TEXT NOT NULL,
        head TEXT NOT NULL,
        log_count INTEGER NOT NULL,
        created_at REAL NOT NULL,
        finished_at REAL NOT NULL,
        pruned_at REAL NOT NULL,
        pruned_by TEXT NOT NULL
    );
CREATE TABLE views (
        run_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (run_id, step)
    ) WITHOUT ROWID;
INSERT INTO "views" VALUES('chat',1,'{"compaction":null,"events":["propose","nothing_to_do","give_up"],"message_count":1,"state":"talking","step":1,"tools":["get_order"]}');
INSERT INTO "views" VALUES('chat',2,'{"compaction":null,"events":["propose","nothing_to_do","give_up"],"message_count":3,"state":"talking","step":2,"tools":["get_order"]}');
INSERT INTO "views" VALUES('chat',3,'{"compaction":null,"events":["propose","nothing_to_do","give_up"],"message_count":5,"state":"talking","step":3,"tools":["get_order"]}');
INSERT INTO "views" VALUES('chat',4,'{"compaction":null,"events":[],"message_count":8,"state":"cancelling","step":4,"tools":["cancel_order"]}');
INSERT INTO "views" VALUES('chat',5,'{"compaction":null,"events":["propose","nothing_to_do","give_up"],"message_count":10,"state":"talking","step":5,"tools":["get_order"]}');
INSERT INTO "views" VALUES('declined',1,'{"compaction":null,"events":["details_complete"],"message_count":1,"state":"collecting","step":1,"tools":["get_order"]}');
INSERT INTO "views" VALUES('declined',2,'{"compaction":null,"events":["details_complete"],"message_count":3,"state":"collecting","step":2,"tools":["get_order"]}');
INSERT INTO "views" VALUES('declined',3,'{"compaction":null,"events":["verified","cannot_verify"],"message_count":5,"state":"verifying","step":3,"tools":["get_order","get_policy"]}');
INSERT INTO "views" VALUES('declined',4,'{"compaction":null,"events":["verified","cannot_verify"],"message_count":7,"state":"verifying","step":4,"tools":["get_order","get_policy"]}');
INSERT INTO "views" VALUES('declined',5,'{"compaction":null,"events":["small_refund","large_refund","no_refund"],"message_count":9,"state":"deciding","step":5,"tools":[]}');
INSERT INTO "views" VALUES('declined',6,'{"compaction":null,"events":[],"message_count":12,"state":"replying","step":6,"tools":["send_reply"]}');
INSERT INTO "views" VALUES('declined',7,'{"compaction":null,"events":[],"message_count":14,"state":"replying","step":7,"tools":["send_reply"]}');
INSERT INTO "views" VALUES('lowered',1,'{"compaction":null,"events":["details_complete"],"message_count":1,"state":"collecting","step":1,"tools":["get_order"]}');
INSERT INTO "views" VALUES('lowered',2,'{"compaction":null,"events":["details_complete"],"message_count":3,"state":"collecting","step":2,"tools":["get_order"]}');
INSERT INTO "views" VALUES('lowered',3,'{"compaction":null,"events":["verified","cannot_verify"],"message_count":5,"state":"verifying","step":3,"tools":["get_order","get_policy"]}');
INSERT INTO "views" VALUES('lowered',4,'{"compaction":null,"events":["verified","cannot_verify"],"message_count":7,"state":"verifying","step":4,"tools":["get_order","get_policy"]}');
INSERT INTO "views" VALUES('lowered',5,'{"compaction":null,"events":["small_refund","large_refund","no_refund"],"message_count":9,"state":"deciding","step":5,"tools":[]}');
INSERT INTO "views" VALUES('lowered',6,'{"compaction":null,"events":[],"message_count":12,"state":"refunding","step":6,"tools":["refund_item"]}');
INSERT INTO "views" VALUES('lowered',7,'{"compaction":null,"events":[],"message_count":14,"state":"refunding","step":7,"tools":["refund_item"]}');
INSERT INTO "views" VALUES('lowered',8,'{"compaction":null,"events":[],"message_count":16,"state":"refunding","step":8,"tools":["refund_item"]}');
INSERT INTO "views" VALUES('messy',1,'{"compaction":null,"events":["details_complete"],"message_count":1,"state":"collecting","step":1,"tools":["get_order"]}');
INSERT INTO "views" VALUES('messy',2,'{"compaction":null,"events":["details_complete"],"message_count":3,"state":"collecting","step":2,"tools":["get_order"]}');
INSERT INTO "views" VALUES('messy',3,'{"compaction":null,"events":["details_complete"],"message_count":5,"state":"collecting","step":3,"tools":["get_order"]}');
INSERT INTO "views" VALUES('messy',4,'{"compaction":null,"events":["details_complete"],"message_count":7,"state":"collecting","step":4,"tools":["get_order"]}');
INSERT INTO "views" VALUES('messy',5,'{"compaction":null,"events":["details_complete"],"message_count":9,"state":"collecting","step":5,"tools":["get_order"]}');
INSERT INTO "views" VALUES('messy',6,'{"compaction":null,"events":["verified","cannot_verify"],"message_count":11,"state":"verifying","step":6,"tools":["get_order","get_policy"]}');
INSERT INTO "views" VALUES('messy',7,'{"compaction":null,"events":["verified","cannot_verify"],"message_count":13,"state":"verifying","step":7,"tools":["get_order","get_policy"]}');
INSERT INTO "views" VALUES('messy',8,'{"compaction":null,"events":["small_refund","large_refund","no_refund"],"message_count":15,"state":"deciding","step":8,"tools":[]}');
INSERT INTO "views" VALUES('messy',9,'{"compaction":null,"events":[],"message_count":17,"state":"refunding","step":9,"tools":["refund_item"]}');
INSERT INTO "views" VALUES('messy',10,'{"compaction":null,"events":[],"message_count":19,"state":"replying","step":10,"tools":["send_reply"]}');
CREATE TABLE web_refusals (
        refusal_id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        approval_id TEXT,
        account TEXT,
        action TEXT NOT NULL,
        code TEXT NOT NULL,
        reason TEXT NOT NULL,
        at REAL NOT NULL,
        remote TEXT NOT NULL DEFAULT ''
    , hash TEXT);
CREATE INDEX runs_status ON runs (status);
CREATE INDEX approvals_open ON approvals (decision, expires_at);
CREATE INDEX effects_run ON effects (run_id, key)
    ;
CREATE INDEX runs_runnable ON runs (status, lease_until)
    ;
CREATE INDEX web_refusals_run ON web_refusals (run_id, refusal_id);
CREATE INDEX notifications_due ON notifications (status, next_attempt_at);
CREATE INDEX notifications_approval ON notifications (approval_id);
CREATE INDEX notifications_run ON notifications (run_id);
CREATE INDEX approvals_waiting ON approvals (decision, requested_at, approval_id, run_id);
CREATE INDEX approvals_run ON approvals (run_id, requested_at);
CREATE INDEX runs_id_status ON runs (run_id, status, workflow);
CREATE INDEX runs_created ON runs (created_at, run_id);
CREATE INDEX runs_workflow_created ON runs (workflow, created_at, run_id);
CREATE INDEX runs_status_created ON runs (status, created_at, run_id)
    ;
CREATE INDEX runs_definition ON runs (status, definition_hash, run_id);
CREATE INDEX definitions_workflow ON definitions (workflow, recorded_at)
    ;
CREATE INDEX replies_unread ON replies (run_id, seq) WHERE read_step IS NULL;
CREATE INDEX handovers_queue ON handovers (closed_at, handed_at, handover_id);
CREATE INDEX handovers_run ON handovers (run_id, handed_at);
CREATE INDEX subjects_run ON subjects (run_id);
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('shop_calls',3);
COMMIT;
